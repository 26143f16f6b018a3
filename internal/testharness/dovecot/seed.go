package dovecot

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// SeedMessage is a message SeedMaildir writes.
type SeedMessage struct {
	// Raw is the message as stored, CRLF or LF line endings alike.
	Raw []byte
	// InternalDate becomes the file's mtime, which Dovecot reports as
	// INTERNALDATE, with whole-second precision. Zero means now.
	InternalDate time.Time
	// Seen sets \Seen.
	Seen bool
	// Flags are further system flags: \Answered, \Flagged, \Deleted,
	// \Draft. Keywords are not supported.
	Flags []imap.Flag
}

// maildirFlagLetters maps system flags to Maildir info letters.
var maildirFlagLetters = map[imap.Flag]byte{
	imap.FlagDraft:    'D',
	imap.FlagFlagged:  'F',
	imap.FlagAnswered: 'R',
	imap.FlagSeen:     'S',
	imap.FlagDeleted:  'T',
}

// folderChars are the characters SeedMaildir accepts in folder names: ones
// Dovecot stores unchanged on disk (no modified UTF-7, no escaping).
const folderChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.+,()[]/"

// SeedMaildir writes msgs straight into folder's Maildir, bypassing IMAP,
// which is much faster than Append for thousands of messages, and returns
// the UIDs Dovecot assigned them, in the order of msgs.
//
// Each message is written to tmp/, given its INTERNALDATE as mtime and the
// mail user as owner, and renamed into cur/ with the info ":2," plus its
// flags. File names carry a per-server increasing timestamp, which Dovecot
// sorts new files by, so it assigns UIDs in the order the messages were
// written. SeedMaildir then opens the folder (EXAMINE) to make Dovecot
// assign them, so STATUS, NOTIFY and IDLE sessions see the messages as soon
// as it returns.
//
// Preconditions: folder exists (INBOX, a default folder, or one made with
// CreateFolder) and its name is plain ASCII from letters, digits, "/" and
// " -_.+,()[]" without empty, "." or ".."-prefixed parts; nobody else adds
// messages to it during the call. It does not write keywords, and does not
// take Dovecot's uidlist lock: files appear to Dovecot as if delivered by
// another program.
func (u *User) SeedMaildir(folder string, msgs []SeedMessage) []imap.UID {
	u.t.Helper()
	dir, err := u.maildirPath(folder)
	u.Check(err, "seed %q", folder)
	if len(msgs) == 0 {
		return nil
	}

	// Opening the folder creates its directories (default folders exist
	// lazily) and tells which UIDs the new messages will get.
	var uidNext imap.UID
	err = u.withHelper(func(c *imapclient.Client) error {
		data, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait()
		if err != nil {
			return fmt.Errorf("examine: %w", err)
		}
		uidNext = data.UIDNext
		return c.Unselect().Wait()
	})
	u.Check(err, "seed %q", folder)

	for i, m := range msgs {
		err := u.writeSeed(dir, m)
		u.Check(err, "seed %q: message %d", folder, i)
	}

	// Dovecot notices new files in cur/ by its mtime; it rescans a cur/
	// modified within the last second on every sync, so one EXAMINE should
	// do. Retry briefly rather than trust that.
	var uids []imap.UID
	for deadline := time.Now().Add(2 * time.Second); ; {
		err = u.withHelper.Examine(folder, func(c *imapclient.Client) error {
			data, err := c.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{{imap.UIDRange{Start: uidNext, Stop: 0}}}}, nil).Wait()
			if err != nil {
				return err
			}
			uids = data.AllUIDs()
			return nil
		})
		u.Check(err, "seed %q: list new UIDs", folder)
		// UID n:* matches the highest UID even below n; drop that case.
		uids = slices.DeleteFunc(uids, func(uid imap.UID) bool { return uid < uidNext })
		if len(uids) >= len(msgs) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(uids) != len(msgs) {
		u.t.Fatalf("dovecot: user %s: seeded %d messages into %q but Dovecot added %d (UIDs %v)", u.name, len(msgs), folder, len(uids), uids)
	}
	return uids
}

// maildirPath returns the directory of folder's Maildir.
func (u *User) maildirPath(folder string) (string, error) {
	if strings.EqualFold(folder, "INBOX") {
		return filepath.Join(u.home, "Maildir", "INBOX"), nil
	}
	if folder == "" || strings.Trim(folder, folderChars) != "" {
		return "", fmt.Errorf("folder name %q has characters SeedMaildir does not map to disk", folder)
	}
	for _, part := range strings.Split(folder, string(Separator)) {
		if part == "" || strings.HasPrefix(part, ".") {
			return "", fmt.Errorf("folder name %q has an empty or dot-prefixed part", folder)
		}
	}
	return filepath.Join(u.home, "Maildir", filepath.FromSlash(folder)), nil
}

// writeSeed writes one message into dir's tmp/ and renames it into cur/.
func (u *User) writeSeed(dir string, m SeedMessage) error {
	info := []byte{}
	if m.Seen {
		info = append(info, 'S')
	}
	for _, f := range m.Flags {
		letter, ok := maildirFlagLetters[f]
		if !ok {
			return fmt.Errorf("flag %q is not a system flag SeedMaildir supports", f)
		}
		if !slices.Contains(info, letter) {
			info = append(info, letter)
		}
	}
	slices.Sort(info)

	in := u.srv.in
	seq := in.seedSeq.Add(1)
	secs := in.seedBase.Unix() + int64(seq/1_000_000)
	// The sequence number appears once only. Dovecot hashes a Maildir file
	// name's base with a 28-bit ELF-style hash in which a run of digits
	// repeated further along the name largely cancels out: names carrying
	// the sequence twice (as "M<seq>" and again as "Q<seq>") fell into
	// about 10 000 hash buckets for 100 000 files, and every sync of such
	// a folder spent tens of CPU-seconds comparing names.
	base := fmt.Sprintf("%d.M%dP%d.mailfathom-seed,S=%d", secs, seq%1_000_000, os.Getpid(), len(m.Raw))
	tmp := filepath.Join(dir, "tmp", base)
	cur := filepath.Join(dir, "cur", base+":2,"+string(info))

	date := m.InternalDate
	if date.IsZero() {
		date = time.Now()
	}
	if err := os.WriteFile(tmp, m.Raw, 0o600); err != nil {
		return err
	}
	if err := in.chownMail(tmp); err != nil {
		return err
	}
	if err := os.Chtimes(tmp, date, date); err != nil {
		return err
	}
	return os.Rename(tmp, cur)
}
