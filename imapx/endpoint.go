package imapx

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/mailfathom/mailfathom/internal/sasl"
)

// ConnectionSecurity is how a connection to the IMAP server is protected.
// The values are also the names an account's configuration uses
// (MAILFATHOM_ACCOUNTS_<i>_CONNECTION_SECURITY), matched exactly.
type ConnectionSecurity string

// The connection-security modes.
const (
	// TLSOnConnect encrypts immediately with implicit TLS.
	TLSOnConnect ConnectionSecurity = "TlsOnConnect"
	// StartTLSRequired upgrades with STARTTLS and fails with
	// ErrStartTLSUnavailable when the server does not advertise it.
	StartTLSRequired ConnectionSecurity = "StartTlsRequired"
	// StartTLSWhenAvailable upgrades with STARTTLS when the server advertises
	// it and otherwise continues unencrypted.
	StartTLSWhenAvailable ConnectionSecurity = "StartTlsWhenAvailable"
	// Auto behaves as TLSOnConnect on port 993, the implicit-TLS port, and
	// as StartTLSWhenAvailable on any other port, as MailKit's
	// SecureSocketOptions.Auto does.
	Auto ConnectionSecurity = "Auto"
	// None never encrypts.
	None ConnectionSecurity = "None"
)

// ConnectionSecurities lists the modes in documentation order.
var ConnectionSecurities = []ConnectionSecurity{TLSOnConnect, StartTLSRequired, StartTLSWhenAvailable, Auto, None}

// CanStayUnencrypted reports whether a connection in mode s may complete
// without encryption (StartTLSWhenAvailable, Auto, None), which is what the
// opt-ins AllowInsecureConnection and AllowClearTextOverUnencrypted guard.
// It does not say whether a given connection ended up encrypted.
func (s ConnectionSecurity) CanStayUnencrypted() bool {
	return s == StartTLSWhenAvailable || s == Auto || s == None
}

// DefaultPort is the IMAP port for s: 993, the implicit-TLS port (RFC 8314),
// for TLSOnConnect, and 143 otherwise.
func (s ConnectionSecurity) DefaultPort() int {
	if s == TLSOnConnect {
		return 993
	}
	return 143
}

// Endpoint says where and as whom a session connects.
type Endpoint struct {
	// AccountID names the account in log lines; it is never sent anywhere.
	AccountID string
	Host      string
	Port      int
	// Security is how the connection is protected; empty means
	// TLSOnConnect, configuration's default.
	Security ConnectionSecurity
	// TLSConfig is cloned for every connection. Nil means the system roots.
	// ServerName defaults to Host. InsecureSkipVerify is refused.
	TLSConfig *tls.Config
	Username  string
	// Password is called once per connection, just before authenticating;
	// the session zeroes the returned slice as soon as the credential has
	// been sent, so it must return a slice the caller no longer needs. It
	// must be nil when Token is set.
	Password func(ctx context.Context) ([]byte, error)
	// Token, when set, makes the endpoint a token account (one whose
	// allow-list permits only XOAUTH2 and/or OAUTHBEARER): it authenticates
	// with OAUTHBEARER (RFC 7628) when the server offers it and
	// PermittedMechanisms permits it, with XOAUTH2 otherwise, and never with
	// a password or the LOGIN command. Token is called once per connection,
	// after the mechanism has been chosen, so a server offering neither
	// requests no token; the session zeroes the returned slice as soon as
	// the token has been sent. Its error becomes a *TokenError, which is
	// terminal here: a token source retries within its own budget
	// (internal/mailoauth).
	Token func(ctx context.Context) ([]byte, error)
	// TokenRefused, when set, is called when the server refused the token
	// Token returned, before OpenReadSession returns the
	// *AuthenticationError, so the source does not hand that token out
	// again.
	TokenRefused func()
	// PermittedMechanisms is the account's SASL allow-list; empty means
	// PLAIN and LOGIN, configuration's default. Its order is ignored.
	PermittedMechanisms []sasl.Mechanism
	// AllowInsecureConnection is the account's AllowInsecureConnection
	// opt-in, without which a mode that can stay unencrypted
	// (StartTlsWhenAvailable, Auto, None) is refused before connecting.
	AllowInsecureConnection bool
	// AllowClearTextOverUnencrypted is the account's
	// AllowClearTextAuthenticationOverUnencryptedConnection opt-in.
	AllowClearTextOverUnencrypted bool
	// Compression says when a ReadSession's main connection, the one that
	// fetches message content, asks for COMPRESS=DEFLATE (RFC 4978; see
	// CompressionPolicy); a server that does not advertise it is not
	// asked, and one that refuses leaves the connection uncompressed. The
	// reconciliation, write and watch connections carry flags and
	// identifiers only and are never compressed. The zero Endpoint never
	// asks; configuration's default (MAILFATHOM_ACCOUNTS_<i>_COMPRESSION)
	// is CompressionAuto.
	Compression CompressionPolicy
	// Dial opens the TCP connection. Nil means a net.Dialer. Tests use it to
	// route through faultproxy or to record the bytes a session sends.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (ep Endpoint) address() string {
	return net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
}

// DefaultCommandTimeout is the CommandTimeout used when none is set.
const DefaultCommandTimeout = 2 * time.Minute

// DefaultMaxListedFolders bounds what one ListFolders call retains when
// SessionOptions.MaxListedFolders is zero.
const DefaultMaxListedFolders = 10_000

// SessionOptions tunes a ReadSession.
type SessionOptions struct {
	// Logger receives debug lines with command names and counts only. Nil
	// discards them.
	Logger *slog.Logger
	// CommandTimeout bounds each IMAP command: connection establishment
	// (dial, TLS, greeting, authentication) as a whole, and every later
	// command. For the two FETCH operations it bounds the wait for each
	// message instead, so a large batch may stream for longer than one
	// timeout as long as it keeps making progress; the time the caller's
	// callback takes is not counted. Zero means DefaultCommandTimeout.
	CommandTimeout time.Duration
	// MaxListedFolders bounds how many folders ListFolders retains before
	// it fails with ErrFolderListTooLarge. Zero means
	// DefaultMaxListedFolders.
	MaxListedFolders int
}

func (o SessionOptions) commandTimeout() time.Duration {
	if o.CommandTimeout <= 0 {
		return DefaultCommandTimeout
	}
	return o.CommandTimeout
}

func (o SessionOptions) maxListedFolders() int {
	if o.MaxListedFolders <= 0 {
		return DefaultMaxListedFolders
	}
	return o.MaxListedFolders
}

func (o SessionOptions) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}
