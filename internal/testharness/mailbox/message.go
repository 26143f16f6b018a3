package mailbox

import (
	"fmt"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// flagRecent is IMAP4rev1's per-session \Recent flag (RFC 3501 §2.3.2),
// which go-imap v2 (IMAP4rev2) has no constant for.
const flagRecent imap.Flag = `\Recent`

// Append appends raw to folder with the given INTERNALDATE (the zero time
// means the server's clock) and flags, and returns the UID the server
// assigned, from the APPENDUID response code (RFC 4315 §3). It returns
// the server's refusal as go-imap reports it, an *imap.Error, unwrapped.
func (o Owner) Append(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) (imap.UID, error) {
	var uid imap.UID
	err := o(func(c *imapclient.Client) error {
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
// uid in folder (UID STORE +FLAGS.SILENT / -FLAGS.SILENT, RFC 3501
// §6.4.6). Either may be empty.
func (o Owner) SetFlags(folder string, uid imap.UID, add, remove []imap.Flag) error {
	return o.Select(folder, func(c *imapclient.Client) error {
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
}

// Expunge marks the messages uids in folder \Deleted and expunges exactly
// those (UID EXPUNGE, RFC 4315 §2.1), leaving other \Deleted messages
// alone. With no uids it sends nothing.
func (o Owner) Expunge(folder string, uids ...imap.UID) error {
	if len(uids) == 0 {
		return nil
	}
	set := imap.UIDSetNum(uids...)
	return o.Select(folder, func(c *imapclient.Client) error {
		if err := c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
			return err
		}
		return c.UIDExpunge(set).Close()
	})
}

// UIDs returns the UIDs of all messages in folder, ascending (EXAMINE, UID
// SEARCH ALL).
func (o Owner) UIDs(folder string) ([]imap.UID, error) {
	var uids []imap.UID
	err := o.Examine(folder, func(c *imapclient.Client) error {
		data, err := c.UIDSearch(&imap.SearchCriteria{}, nil).Wait()
		if err != nil {
			return err
		}
		uids = data.AllUIDs()
		return nil
	})
	return uids, err
}

// Flags returns the flags message uid in folder has on the server, read
// with EXAMINE and UID FETCH FLAGS so that reading changes nothing, as a
// non-nil slice. The per-session \Recent flag is left out. It is an error
// if there is no such message.
func (o Owner) Flags(folder string, uid imap.UID) ([]imap.Flag, error) {
	var flags []imap.Flag
	err := o.Examine(folder, func(c *imapclient.Client) error {
		msg, err := fetchOne(c, uid, &imap.FetchOptions{UID: true, Flags: true})
		if err != nil {
			return err
		}
		flags = msg.Flags
		return nil
	})
	return flags, err
}

// Message returns message uid in folder as the server holds it: UID,
// flags (without \Recent), INTERNALDATE, RFC822.SIZE, envelope and the
// full raw message, fetched with BODY.PEEK[] so \Seen is not set. It is an
// error if there is no such message.
func (o Owner) Message(folder string, uid imap.UID) (*imapclient.FetchMessageBuffer, error) {
	var msg *imapclient.FetchMessageBuffer
	err := o.Examine(folder, func(c *imapclient.Client) error {
		var err error
		msg, err = fetchOne(c, uid, &imap.FetchOptions{
			UID: true, Flags: true, InternalDate: true, RFC822Size: true, Envelope: true,
			BodySection: []*imap.FetchItemBodySection{{Peek: true}},
		})
		return err
	})
	return msg, err
}

// fetchOne fetches message uid of the selected folder (UID FETCH) and
// leaves \Recent out of its flags.
func fetchOne(c *imapclient.Client, uid imap.UID, opts *imap.FetchOptions) (*imapclient.FetchMessageBuffer, error) {
	msgs, err := c.Fetch(imap.UIDSetNum(uid), opts).Collect()
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, fmt.Errorf("no message with UID %d", uid)
	}
	flags := []imap.Flag{}
	for _, f := range msgs[0].Flags {
		if f != flagRecent {
			flags = append(flags, f)
		}
	}
	msgs[0].Flags = flags
	return msgs[0], nil
}
