package cyrus

import (
	"fmt"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// The helpers below change or read a user's mail through the user's helper
// session, failing the test on any error. Mailbox-scoped ones SELECT (or,
// when they only read, EXAMINE) the folder and UNSELECT it afterwards, so
// the helper session never stays in a mailbox between calls.

// flagRecent is IMAP4rev1's per-session \Recent flag, which go-imap v2
// (IMAP4rev2) has no constant for. Cyrus reports it in FLAGS.
const flagRecent imap.Flag = `\Recent`

// inMailbox selects folder (read-only with examine), runs f and unselects.
func (u *User) inMailbox(folder string, examine bool, f func(c *imapclient.Client) error) error {
	return u.withHelper(func(c *imapclient.Client) error {
		if _, err := c.Select(folder, &imap.SelectOptions{ReadOnly: examine}).Wait(); err != nil {
			return fmt.Errorf("select %q: %w", folder, err)
		}
		err := f(c)
		if uerr := c.Unselect().Wait(); err == nil && uerr != nil {
			err = fmt.Errorf("unselect: %w", uerr)
		}
		return err
	})
}

func (u *User) check(err error, format string, args ...any) {
	u.t.Helper()
	if err != nil {
		u.t.Fatalf("cyrus: user %s: %s: %v", u.name, fmt.Sprintf(format, args...), err)
	}
}

// Append appends raw to folder with the given INTERNALDATE (the zero time
// means the server's clock) and flags, and returns the UID the server
// assigned (APPENDUID). Cyrus refuses messages Dovecot stores (see the
// package documentation): bare LF line endings, a header line without a
// colon, NUL bytes; the test then fails with the server's reason.
func (u *User) Append(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) imap.UID {
	u.t.Helper()
	uid, err := u.TryAppend(folder, raw, internalDate, flags...)
	u.check(err, "append to %q", folder)
	return uid
}

// TryAppend is Append returning the server's refusal, an *imap.Error,
// instead of failing the test, for tests of what Cyrus refuses.
func (u *User) TryAppend(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) (imap.UID, error) {
	var uid imap.UID
	err := u.withHelper(func(c *imapclient.Client) error {
		cmd := c.Append(folder, int64(len(raw)), &imap.AppendOptions{Flags: flags, Time: internalDate})
		if _, err := cmd.Write(raw); err != nil {
			return err
		}
		if err := cmd.Close(); err != nil {
			return err
		}
		data, err := cmd.Wait()
		if err != nil {
			return err
		}
		if data.UID == 0 {
			return fmt.Errorf("server sent no APPENDUID")
		}
		uid = data.UID
		return nil
	})
	return uid, err
}

// SetFlags adds the flags add and then removes the flags remove on message
// uid in folder (UID STORE +FLAGS.SILENT / -FLAGS.SILENT). Either may be
// empty.
func (u *User) SetFlags(folder string, uid imap.UID, add, remove []imap.Flag) {
	u.t.Helper()
	err := u.inMailbox(folder, false, func(c *imapclient.Client) error {
		for _, st := range []struct {
			op    imap.StoreFlagsOp
			flags []imap.Flag
		}{{imap.StoreFlagsAdd, add}, {imap.StoreFlagsDel, remove}} {
			if len(st.flags) == 0 {
				continue
			}
			if err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: st.op, Silent: true, Flags: st.flags}, nil).Close(); err != nil {
				return err
			}
		}
		return nil
	})
	u.check(err, "set flags of UID %d in %q", uid, folder)
}

// Expunge marks the messages uids in folder \Deleted and expunges exactly
// those (UID EXPUNGE), leaving other \Deleted messages alone.
func (u *User) Expunge(folder string, uids ...imap.UID) {
	u.t.Helper()
	if len(uids) == 0 {
		return
	}
	set := imap.UIDSetNum(uids...)
	err := u.inMailbox(folder, false, func(c *imapclient.Client) error {
		if err := c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
			return err
		}
		return c.UIDExpunge(set).Close()
	})
	u.check(err, "expunge %v from %q", uids, folder)
}

// CreateFolder creates folder, and any missing parents, with a new
// UIDVALIDITY.
func (u *User) CreateFolder(folder string) {
	u.t.Helper()
	err := u.withHelper(func(c *imapclient.Client) error { return c.Create(folder, nil).Wait() })
	u.check(err, "create %q", folder)
}

// DeleteFolder deletes folder. Cyrus refuses to delete INBOX and, by its
// default specialuse_protect, the special-use folders.
func (u *User) DeleteFolder(folder string) {
	u.t.Helper()
	u.check(u.TryDeleteFolder(folder), "delete %q", folder)
}

// TryDeleteFolder is DeleteFolder returning the server's refusal instead
// of failing the test.
func (u *User) TryDeleteFolder(folder string) error {
	return u.withHelper(func(c *imapclient.Client) error { return c.Delete(folder).Wait() })
}

// RecreateFolder deletes folder and creates it again, empty, and returns
// its new UIDVALIDITY, which differs from the old one (the test fails
// otherwise). It does not work for INBOX or a special-use folder (see
// DeleteFolder).
func (u *User) RecreateFolder(folder string) uint32 {
	u.t.Helper()
	old := u.UIDValidity(folder)
	u.DeleteFolder(folder)
	u.CreateFolder(folder)
	now := u.UIDValidity(folder)
	if now == old {
		u.t.Fatalf("cyrus: user %s: recreated %q kept UIDVALIDITY %d", u.name, folder, old)
	}
	return now
}

// UIDValidity returns folder's UIDVALIDITY (STATUS).
func (u *User) UIDValidity(folder string) uint32 {
	u.t.Helper()
	return u.status(folder, &imap.StatusOptions{UIDValidity: true}).UIDValidity
}

// UIDNext returns folder's UIDNEXT (STATUS).
func (u *User) UIDNext(folder string) imap.UID {
	u.t.Helper()
	return u.status(folder, &imap.StatusOptions{UIDNext: true}).UIDNext
}

// HighestModSeq returns folder's HIGHESTMODSEQ (STATUS).
func (u *User) HighestModSeq(folder string) uint64 {
	u.t.Helper()
	return u.status(folder, &imap.StatusOptions{HighestModSeq: true}).HighestModSeq
}

func (u *User) status(folder string, opts *imap.StatusOptions) *imap.StatusData {
	u.t.Helper()
	var data *imap.StatusData
	err := u.withHelper(func(c *imapclient.Client) error {
		var err error
		data, err = c.Status(folder, opts).Wait()
		return err
	})
	u.check(err, "status %q", folder)
	return data
}

// UIDs returns the UIDs of all messages in folder, ascending (EXAMINE, UID
// SEARCH ALL).
func (u *User) UIDs(folder string) []imap.UID {
	u.t.Helper()
	var uids []imap.UID
	err := u.inMailbox(folder, true, func(c *imapclient.Client) error {
		data, err := c.UIDSearch(&imap.SearchCriteria{}, nil).Wait()
		if err != nil {
			return err
		}
		uids = data.AllUIDs()
		return nil
	})
	u.check(err, "list UIDs of %q", folder)
	return uids
}

// Flags returns the flags message uid in folder has on the server, read
// with EXAMINE and UID FETCH FLAGS so that reading changes nothing. The
// per-session \Recent flag is left out. It fails the test if there is no
// such message.
func (u *User) Flags(folder string, uid imap.UID) []imap.Flag {
	u.t.Helper()
	var flags []imap.Flag
	err := u.inMailbox(folder, true, func(c *imapclient.Client) error {
		msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, Flags: true}).Collect()
		if err != nil {
			return err
		}
		if len(msgs) != 1 {
			return fmt.Errorf("no message with UID %d", uid)
		}
		flags = withoutRecent(msgs[0].Flags)
		return nil
	})
	u.check(err, "read flags of UID %d in %q", uid, folder)
	return flags
}

func withoutRecent(flags []imap.Flag) []imap.Flag {
	out := []imap.Flag{}
	for _, f := range flags {
		if f != flagRecent {
			out = append(out, f)
		}
	}
	return out
}

// Message returns message uid in folder as the server holds it: UID,
// flags (without \Recent), INTERNALDATE, RFC822.SIZE, envelope and the full
// raw message, fetched with BODY.PEEK[] so \Seen is not set.
func (u *User) Message(folder string, uid imap.UID) *imapclient.FetchMessageBuffer {
	u.t.Helper()
	var msg *imapclient.FetchMessageBuffer
	err := u.inMailbox(folder, true, func(c *imapclient.Client) error {
		msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{
			UID: true, Flags: true, InternalDate: true, RFC822Size: true, Envelope: true,
			BodySection: []*imap.FetchItemBodySection{{Peek: true}},
		}).Collect()
		if err != nil {
			return err
		}
		if len(msgs) != 1 {
			return fmt.Errorf("no message with UID %d", uid)
		}
		msg = msgs[0]
		msg.Flags = withoutRecent(msg.Flags)
		return nil
	})
	u.check(err, "fetch UID %d in %q", uid, folder)
	return msg
}
