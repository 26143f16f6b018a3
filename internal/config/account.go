package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/secret"
)

// CompressionPolicies are the values of MAILFATHOM_ACCOUNTS_<i>_COMPRESSION.
var CompressionPolicies = []imapx.CompressionPolicy{imapx.CompressionAuto, imapx.CompressionOn, imapx.CompressionOff}

// Mode is how an account learns of new mail.
type Mode string

// The synchronization modes.
const (
	// ModePolling synchronizes on the interval and opens no extra connection.
	ModePolling Mode = "Polling"
	// ModePush also watches folders (IDLE/NOTIFY) to end the wait early.
	ModePush Mode = "Push"
)

// Modes lists the modes in documentation order.
var Modes = []Mode{ModePolling, ModePush}

// RemotelyDeletedEmailDisposition is what happens to the local copy of an
// email the server no longer holds.
type RemotelyDeletedEmailDisposition string

// The dispositions.
const (
	// RetainTombstone keeps the local copy, marked as remotely deleted.
	RetainTombstone RemotelyDeletedEmailDisposition = "RetainTombstone"
	// EraseLocalCopy erases the local copy.
	EraseLocalCopy RemotelyDeletedEmailDisposition = "EraseLocalCopy"
)

// RemotelyDeletedEmailDispositions lists the dispositions in documentation
// order.
var RemotelyDeletedEmailDispositions = []RemotelyDeletedEmailDisposition{RetainTombstone, EraseLocalCopy}

// DateLayout is the layout of EARLIEST_EMAIL_RECEIVED_DATE.
const DateLayout = "2006-01-02"

// Account is one configured IMAP account, from the variables
// MAILFATHOM_ACCOUNTS_<i>_<NAME>.
type Account struct {
	// ID is MAILFATHOM_ACCOUNTS_<i>_ID, trimmed; unique among accounts
	// ignoring case. Required.
	ID string
	// Host is MAILFATHOM_ACCOUNTS_<i>_HOST. Required.
	Host string
	// Port is MAILFATHOM_ACCOUNTS_<i>_PORT, 1 to 65535. Default 993 with
	// TlsOnConnect, 143 with every other connection security.
	Port int
	// Username is MAILFATHOM_ACCOUNTS_<i>_USERNAME. Required.
	Username string
	// Password is MAILFATHOM_ACCOUNTS_<i>_PASSWORD, a secret reference.
	// Required for every configured account whose allow-list permits a
	// password mechanism, whether or not synchronization is enabled, and
	// refused for a token account (see OAuth).
	Password secret.Reference
	// OAuth is the account's OAuth block (MAILFATHOM_ACCOUNTS_<i>_OAUTH_*):
	// required for a token account, one whose allow-list permits only
	// XOAUTH2 and/or OAUTHBEARER, and refused for every other. Zero by
	// default.
	OAuth OAuth
	// Mode is MAILFATHOM_ACCOUNTS_<i>_MODE. Default Polling.
	Mode Mode
	// EarliestEmailReceivedDate is
	// MAILFATHOM_ACCOUNTS_<i>_EARLIEST_EMAIL_RECEIVED_DATE, midnight UTC of
	// the configured date (YYYY-MM-DD), which is inside the window. It
	// bounds the IMAP SEARCH SINCE key (the arrival date). Zero by default,
	// meaning unbounded; never after the UTC date Load ran on.
	EarliestEmailReceivedDate time.Time
	// RemotelyDeletedEmailDisposition is
	// MAILFATHOM_ACCOUNTS_<i>_REMOTELY_DELETED_EMAIL_DISPOSITION. Default
	// RetainTombstone.
	RemotelyDeletedEmailDisposition RemotelyDeletedEmailDisposition
	// Compression is MAILFATHOM_ACCOUNTS_<i>_COMPRESSION: when the
	// connection that fetches message content asks for COMPRESS=DEFLATE
	// (RFC 4978) — auto, only for a server that is not on a loopback,
	// link-local or private address; on, whenever the server offers it;
	// off, never. Default auto.
	Compression imapx.CompressionPolicy
	// MaxDownloadBytesPerDay is
	// MAILFATHOM_ACCOUNTS_<i>_MAX_DOWNLOAD_BYTES_PER_DAY, the message
	// content the account's forward passes may download in any 24 hours
	// (a rolling window shared by every replica), at least
	// MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES and at most 1 PiB. 0 by default,
	// meaning unlimited.
	MaxDownloadBytesPerDay int64
	// TransportSecurity is the account's transport security policy.
	TransportSecurity TransportSecurity
	// Folders are MAILFATHOM_ACCOUNTS_<i>_FOLDERS_<j>_*, in index order.
	// Default: DefaultFolders, alias INBOX on the Inbox role.
	Folders []Folder
}

type rawAccount struct {
	ID                              string       `env:"ID"`
	Host                            string       `env:"HOST"`
	Port                            string       `env:"PORT"`
	Username                        string       `env:"USERNAME"`
	Password                        string       `env:"PASSWORD"`
	Mode                            string       `env:"MODE" envDefault:"Polling"`
	EarliestEmailReceivedDate       string       `env:"EARLIEST_EMAIL_RECEIVED_DATE"`
	RemotelyDeletedEmailDisposition string       `env:"REMOTELY_DELETED_EMAIL_DISPOSITION" envDefault:"RetainTombstone"`
	Compression                     string       `env:"COMPRESSION" envDefault:"auto"`
	MaxDownloadBytesPerDay          string       `env:"MAX_DOWNLOAD_BYTES_PER_DAY" envDefault:"0"`
	Transport                       rawTransport // no prefix: CONNECTION_SECURITY etc. sit beside ID
	OAuth                           rawOAuth     // no prefix: OAUTH_TOKEN_ENDPOINT etc. sit beside ID
	Folders                         []rawFolder  `envPrefix:"FOLDERS_"`
}

func accountVar(i int, name string) string {
	return fmt.Sprintf("%sACCOUNTS_%d_%s", Prefix, i, name)
}

// convertAccounts converts every account, then checks that IDs are unique.
func convertAccounts(c *converter, raw []rawAccount) []Account {
	if len(raw) == 0 {
		return nil
	}
	accounts := make([]Account, len(raw))
	first := map[string]int{}
	for i, ra := range raw {
		a := convertAccount(c, i, ra)
		accounts[i] = a
		if a.ID == "" {
			continue
		}
		key := strings.ToLower(a.ID)
		if k, dup := first[key]; dup {
			c.add(accountVar(i, "ID"), "Account '%s' has the same ID as account %d (%s); account IDs are compared trimmed and ignoring case", a.ID, k, accountVar(k, "ID"))
		} else {
			first[key] = i
		}
	}
	return accounts
}

func convertAccount(c *converter, i int, raw rawAccount) Account {
	v := func(name string) string { return accountVar(i, name) }
	a := Account{ID: strings.TrimSpace(raw.ID), Host: raw.Host, Username: raw.Username}

	label := fmt.Sprintf("Account %d", i)
	switch {
	case a.ID == "":
		c.add(v("ID"), "%s: an account ID is required", label)
	case hasControl(a.ID) || len(a.ID) > 100:
		c.add(v("ID"), "%s: an account ID must be at most 100 bytes without control characters", label)
		a.ID = ""
	default:
		label = "Account '" + a.ID + "'"
	}
	if a.Host == "" {
		c.add(v("HOST"), "%s: a host is required", label)
	} else if hasControl(a.Host) || strings.ContainsAny(a.Host, " /") {
		c.add(v("HOST"), "%s: the host must be a host name or IP address", label)
	}
	if a.Username == "" {
		c.add(v("USERNAME"), "%s: a user name is required", label)
	}
	a.Password = c.reference(v("PASSWORD"), raw.Password)

	if m, ok := enumIn(c, v("MODE"), label+": ", raw.Mode, Modes); ok {
		a.Mode = m
	}
	if d, ok := enumIn(c, v("REMOTELY_DELETED_EMAIL_DISPOSITION"), label+": ", raw.RemotelyDeletedEmailDisposition, RemotelyDeletedEmailDispositions); ok {
		a.RemotelyDeletedEmailDisposition = d
	}
	if raw.EarliestEmailReceivedDate != "" {
		a.EarliestEmailReceivedDate = convertEarliestDate(c, v("EARLIEST_EMAIL_RECEIVED_DATE"), label, raw.EarliestEmailReceivedDate)
	}

	if p, ok := enumIn(c, v("COMPRESSION"), label+": ", raw.Compression, CompressionPolicies); ok {
		a.Compression = p
	}

	a.MaxDownloadBytesPerDay = c.integer64(v("MAX_DOWNLOAD_BYTES_PER_DAY"), raw.MaxDownloadBytesPerDay, 0, MaxDownloadBytesPerDay)

	t, securityOK, mechanismsOK := convertTransport(c, i, label, raw.Transport)
	a.TransportSecurity = t
	a.OAuth = convertOAuth(c, i, label, raw.OAuth)
	if mechanismsOK {
		convertCredential(c, i, label, t.TokenOnly(), raw.Password, raw.OAuth)
	}
	if raw.Port == "" {
		a.Port = imapx.TLSOnConnect.DefaultPort()
		if securityOK {
			a.Port = t.ConnectionSecurity.DefaultPort()
		}
	} else {
		a.Port = c.integer(v("PORT"), raw.Port, 1, 65535)
	}

	a.Folders = convertFolders(c, i, label, raw.Folders)
	return a
}

// MaxDownloadBytesPerDay is the largest daily download budget: 1 PiB.
const MaxDownloadBytesPerDay = 1 << 50

// convertEarliestDate parses the date and refuses one after the current UTC
// date, which would exclude every email and look like synchronization
// silently doing nothing.
func convertEarliestDate(c *converter, variable, label, raw string) time.Time {
	d, err := time.Parse(DateLayout, raw)
	if err != nil {
		c.add(variable, "%s: the earliest date must be written YYYY-MM-DD, such as 2024-01-01", label)
		return time.Time{}
	}
	now := c.now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if d.After(today) {
		c.add(variable, "%s: the date is after today's UTC date (%s), which would exclude every email", label, today.Format(DateLayout))
		return time.Time{}
	}
	return d
}

// AccountKey is the normalized account identifier the database keys an
// account by: trimmed and lower-cased, so recasing an identifier in
// configuration is not a second account.
func AccountKey(id string) string { return strings.ToLower(strings.TrimSpace(id)) }

// Account returns the configured account whose identifier matches id after
// normalization (AccountKey), and false when none does.
func (c *Config) Account(id string) (Account, bool) {
	key := AccountKey(id)
	for _, a := range c.Accounts {
		if AccountKey(a.ID) == key {
			return a, true
		}
	}
	return Account{}, false
}
