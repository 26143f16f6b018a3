package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
)

// The other client: a mail program of the mailbox owner's, on connections
// of its own straight to Dovecot (not through the fault proxy). It never
// fails the test from its goroutine: an operation that fails (Dovecot
// restarting, say) is counted and skipped.

// outside connects to Dovecot as a's owner.
func (s *soak) outside(a *soakAccount) (*imapclient.Client, error) { return a.user.DialTLS() }

// withOutside runs f on a fresh connection of a's owner, bounded in time,
// and counts its failure.
func (s *soak) withOutside(a *soakAccount, f func(c *imapclient.Client) error) error {
	c, err := s.outside(a)
	if err == nil {
		done := make(chan error, 1)
		go func() { done <- f(c) }()
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			err = fmt.Errorf("outside operation timed out")
		}
		closeQuietly(c)
	}
	if err != nil && !errors.Is(err, errNothingToChange) {
		s.counts.outsideErrors.Add(1)
	}
	return err
}

func closeQuietly(c *imapclient.Client) {
	done := make(chan struct{})
	go func() {
		_ = c.Logout().Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	_ = c.Close()
}

// probeSubject begins the subject of the probe message.
const probeSubject = "Soak probe"

// soakMessage is the next delivered message: a synthetic message with a
// Message-ID of its own, now and then carrying the probe phrase.
func (s *soak) soakMessage(probe bool) []byte {
	n := int(s.nextMessage.Add(1))
	if probe {
		// A short message of its own, so that its one passage is about
		// the probe phrase and nothing else.
		return fmt.Appendf(nil, "From: Probe <probe@example.test>\r\nTo: Recipient <recipient@example.test>\r\n"+
			"Subject: %s %d\r\nMessage-ID: <probe-%d-%d@example.test>\r\nDate: %s\r\nMIME-Version: 1.0\r\n"+
			"Content-Type: text/plain; charset=utf-8\r\n\r\nThe %s arrived at last: %s.\r\n",
			probeSubject, n, s.seed, n, time.Now().UTC().Format(time.RFC1123Z), s.probe, s.probe)
	}
	return mailgen.Message(s.seed, n, 600+s.intn(6000))
}

// deliver appends one new message to path of a, from outside MailFathom,
// and reports whether it was delivered.
func (s *soak) deliver(a *soakAccount, path string) bool {
	return s.deliverRaw(a, path, s.soakMessage(false))
}

func (s *soak) deliverRaw(a *soakAccount, path string, raw []byte) bool {
	var flags []imap.Flag
	if s.intn(4) == 0 {
		flags = append(flags, imap.FlagSeen)
	}
	err := s.withOutside(a, func(c *imapclient.Client) error {
		cmd := c.Append(path, int64(len(raw)), &imap.AppendOptions{Flags: flags})
		if _, err := cmd.Write(raw); err != nil {
			return err
		}
		if err := cmd.Close(); err != nil {
			return err
		}
		data, err := cmd.Wait()
		if err == nil {
			s.event("outside delivers %s/%s UID %d %s %v", a.id, path, data.UID, headerMessageID(headerOf(raw)), flags)
		}
		return err
	})
	if err == nil {
		s.counts.delivered.Add(1)
	}
	return err == nil
}

// deliverMail delivers into a random folder of a random account every 0.2
// to 1.2 s until ctx ends, and the probe message once, in the last fifth
// of the run, claimed so that nothing else changes it.
func (s *soak) deliverMail(ctx context.Context) {
	for ctx.Err() == nil {
		a := s.accounts[s.intn(len(s.accounts))]
		f := a.folders[s.intn(len(a.folders))]
		if !s.probeSent.Load() && s.elapsed() > s.duration*4/5 && f.remotePath != a.recreate {
			// Claimed, the probe is never moved, expunged or deleted by
			// the other client or a change asked of MailFathom: the
			// verdict searches for it.
			probe := s.soakMessage(true)
			s.claim(headerMessageID(headerOf(probe)))
			if s.deliverRaw(a, f.remotePath, probe) {
				s.probeSent.Store(true)
			}
		} else {
			s.deliver(a, f.remotePath)
		}
		sleepCtx(ctx, s.between(200*time.Millisecond, 1200*time.Millisecond))
	}
}

// changeFromOutside sets and clears flags, moves and expunges messages and,
// twice in a run, recreates a folder under its alias, every 0.5 to 2 s.
func (s *soak) changeFromOutside(ctx context.Context) {
	recreations := 0
	for ctx.Err() == nil {
		sleepCtx(ctx, s.between(500*time.Millisecond, 2*time.Second))
		a := s.accounts[s.intn(len(s.accounts))]
		if a.recreate != "" && recreations < 2 && s.elapsed() > s.duration*time.Duration(1+2*recreations)/5 {
			recreations++
			if s.recreateFolder(a) == nil {
				s.counts.recreated.Add(1)
			}
			continue
		}
		f := a.folders[s.intn(len(a.folders))]
		switch s.intn(6) {
		case 0, 1, 2:
			flag := []imap.Flag{imap.FlagFlagged, imap.FlagSeen, imap.FlagAnswered, "$Soak"}[s.intn(4)]
			if s.outsideFlag(a, f.remotePath, flag, s.intn(2) == 0, "") == nil {
				s.counts.flagged.Add(1)
			}
		case 3, 4:
			dest := a.folders[s.intn(len(a.folders))].remotePath
			if dest != f.remotePath && s.outsideMove(a, f.remotePath, dest, "") == nil {
				s.counts.moved.Add(1)
			}
		case 5:
			if s.outsideExpunge(a, f.remotePath, "") == nil {
				s.counts.expunged.Add(1)
			}
		}
	}
}

// errNothingToChange is a folder holding no message the other client may
// change.
var errNothingToChange = fmt.Errorf("no unclaimed message")

// pickOutside selects path and returns the UID of a random message whose
// Message-ID is not claimed by a change asked of MailFathom — or, with
// messageID set, the UID of that message (a race on purpose).
func (s *soak) pickOutside(c *imapclient.Client, path, messageID string) (imap.UID, string, error) {
	sel, err := c.Select(path, nil).Wait()
	if err != nil {
		return 0, "", err
	}
	if sel.NumMessages == 0 {
		return 0, "", errNothingToChange
	}
	msgs, err := c.Fetch(imap.SeqSet{imap.SeqRange{Start: 1, Stop: 0}}, &imap.FetchOptions{
		UID: true, BodySection: []*imap.FetchItemBodySection{{Peek: true, Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"Message-ID"}}},
	}).Collect()
	if err != nil {
		return 0, "", err
	}
	type candidate struct {
		uid imap.UID
		id  string
	}
	var cands []candidate
	for _, m := range msgs {
		var hdr []byte
		for _, b := range m.BodySection {
			hdr = b.Bytes
		}
		id := headerMessageID(hdr)
		switch {
		case messageID != "" && id == messageID:
			return m.UID, id, nil
		case messageID == "" && !s.isClaimed(id):
			cands = append(cands, candidate{m.UID, id})
		}
	}
	if len(cands) == 0 {
		return 0, "", errNothingToChange
	}
	c0 := cands[s.intn(len(cands))]
	return c0.uid, c0.id, nil
}

// outsideFlag sets (or clears) flag on a message of path.
func (s *soak) outsideFlag(a *soakAccount, path string, flag imap.Flag, set bool, messageID string) error {
	return s.withOutside(a, func(c *imapclient.Client) error {
		uid, id, err := s.pickOutside(c, path, messageID)
		if err != nil {
			return err
		}
		op := imap.StoreFlagsAdd
		if !set {
			op = imap.StoreFlagsDel
		}
		s.event("outside %s %s on %s/%s UID %d %s", map[bool]string{true: "sets", false: "clears"}[set], flag, a.id, path, uid, id)
		return c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: op, Silent: true, Flags: []imap.Flag{flag}}, nil).Close()
	})
}

// outsideMove moves a message of path to dest with UID MOVE.
func (s *soak) outsideMove(a *soakAccount, path, dest, messageID string) error {
	return s.withOutside(a, func(c *imapclient.Client) error {
		uid, id, err := s.pickOutside(c, path, messageID)
		if err != nil {
			return err
		}
		data, err := c.Move(imap.UIDSetNum(uid), dest).Wait()
		s.event("outside moves %s/%s UID %d %s to %s: %+v %v", a.id, path, uid, id, dest, data, err)
		return err
	})
}

// outsideExpunge deletes a message of path for good (UID EXPUNGE of that
// message alone).
func (s *soak) outsideExpunge(a *soakAccount, path, messageID string) error {
	return s.withOutside(a, func(c *imapclient.Client) error {
		uid, id, err := s.pickOutside(c, path, messageID)
		if err != nil {
			return err
		}
		s.event("outside expunges %s/%s UID %d %s", a.id, path, uid, id)
		set := imap.UIDSetNum(uid)
		if err := c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
			return err
		}
		return c.UIDExpunge(set).Close()
	})
}

// recreateFolder deletes a's folder a.recreate and creates it again, with
// a new UIDVALIDITY, and delivers two messages into it.
func (s *soak) recreateFolder(a *soakAccount) error {
	s.event("outside recreates %s/%s", a.id, a.recreate)
	err := s.withOutside(a, func(c *imapclient.Client) error {
		if err := c.Delete(a.recreate).Wait(); err != nil {
			return err
		}
		return c.Create(a.recreate, nil).Wait()
	})
	if err != nil {
		return err
	}
	s.deliver(a, a.recreate)
	s.deliver(a, a.recreate)
	return nil
}

func (s *soak) claim(messageID string) {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	s.claimed[messageID] = true
}

func (s *soak) isClaimed(messageID string) bool {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	return s.claimed[messageID]
}

// headerMessageID reads the Message-ID of a header block, "" when it has
// none.
func headerMessageID(hdr []byte) string {
	m, err := mail.ReadMessage(bytes.NewReader(append(bytes.TrimRight(hdr, "\r\n"), "\r\n\r\n"...)))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(m.Header.Get("Message-ID"))
}

// serverMessage is one message as the server holds it.
type serverMessage struct {
	uid       uint32
	flags     []string
	sha       [sha256.Size]byte
	messageID string
}

// serverFolder is a folder as the server holds it.
type serverFolder struct {
	uidValidity uint32
	messages    map[uint32]serverMessage
}

// snapshot reads every configured folder of a with EXAMINE and BODY.PEEK:
// what the verdict compares the stored mail with.
func (s *soak) snapshot(a *soakAccount) (map[string]serverFolder, error) {
	out := map[string]serverFolder{}
	c, err := s.outside(a)
	if err != nil {
		return nil, err
	}
	defer closeQuietly(c)
	for _, f := range a.folders {
		sel, err := c.Select(f.remotePath, &imap.SelectOptions{ReadOnly: true}).Wait()
		if err != nil {
			return nil, fmt.Errorf("examine %s: %w", f.alias, err)
		}
		sf := serverFolder{uidValidity: sel.UIDValidity, messages: map[uint32]serverMessage{}}
		if sel.NumMessages > 0 {
			msgs, err := c.Fetch(imap.SeqSet{imap.SeqRange{Start: 1, Stop: 0}}, &imap.FetchOptions{
				UID: true, Flags: true, BodySection: []*imap.FetchItemBodySection{{Peek: true}},
			}).Collect()
			if err != nil {
				return nil, fmt.Errorf("fetch %s: %w", f.alias, err)
			}
			for _, m := range msgs {
				var raw []byte
				for _, b := range m.BodySection {
					raw = b.Bytes
				}
				sm := serverMessage{uid: uint32(m.UID), sha: sha256.Sum256(raw), messageID: headerMessageID(headerOf(raw))}
				for _, fl := range m.Flags {
					if fl != `\Recent` {
						sm.flags = append(sm.flags, string(fl))
					}
				}
				slices.Sort(sm.flags)
				sf.messages[sm.uid] = sm
			}
		}
		if err := c.Unselect().Wait(); err != nil {
			return nil, err
		}
		out[f.alias] = sf
	}
	return out, nil
}

// headerOf returns the header block of a raw message.
func headerOf(raw []byte) []byte {
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		return raw[:i+2]
	}
	return raw
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// event notes what the run did at this moment, for the explanation of a
// failed verdict.
func (s *soak) event(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs ", s.elapsed().Seconds()) + fmt.Sprintf(format, args...)
	s.eventMu.Lock()
	defer s.eventMu.Unlock()
	s.events = append(s.events, line)
}
