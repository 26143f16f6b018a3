package gmailtest

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/loopback"
)

// AllMail is the folder that shows every message, whatever its labels.
const AllMail = "[Gmail]/All Mail"

// LabelInbox is the system label INBOX stands for.
const LabelInbox = `\Inbox`

// touchKeyword is the keyword a label change adds and removes on the
// message's other occurrences, so their mod-sequences move as Gmail's do.
const touchKeyword imap.Flag = "$GmailTestLabelsChanged"

// Server is a Gmail-like server for one test: a Dovecot of its own, one
// user, and the filter in front of it (see the package documentation).
// Its methods fail the test on error.
type Server struct {
	t    testing.TB
	dv   *dovecot.Server
	user *dovecot.User
	ln   *loopback.Listener

	mu       sync.Mutex
	next     uint64
	byPlace  map[place]*Message
	folders  map[string]bool // the folders created for labels
	validity map[string]uint32
	sessions atomic.Int64
}

// place is one occurrence of a message: a folder's UID under its
// UIDVALIDITY.
type place struct {
	folder   string
	validity uint32
	uid      imap.UID
}

// Message is one Gmail message: one X-GM-MSGID, its labels, and its UID
// in each folder that shows it.
type Message struct {
	// MsgID and ThrID are its X-GM-MSGID and X-GM-THRID.
	MsgID, ThrID uint64

	raw    []byte
	labels []string
	uids   map[string]imap.UID
}

// firstMsgID is where X-GM-MSGIDs start: Gmail's are 64-bit numbers of
// about this size.
const firstMsgID = 1_278_455_344_230_334_865

// Start starts a Dovecot for t, with a user whose [Gmail]/All Mail exists,
// and the filter on a loopback port. Everything stops when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	dv := dovecot.Start(t, dovecot.WithPlaintextAuth())
	s := &Server{
		t: t, dv: dv, user: dv.NewUser(),
		next:     firstMsgID,
		byPlace:  map[place]*Message{},
		folders:  map[string]bool{},
		validity: map[string]uint32{},
	}
	s.user.CreateFolder(AllMail)
	s.ln = loopback.Listen(t, "gmailtest")
	s.ln.Serve(s.serve)
	return s
}

// serve passes the client's connection c through a filter of its own to
// a connection of its own to Dovecot, until either closes.
func (s *Server) serve(c net.Conn) {
	up, err := net.DialTimeout("tcp", s.dv.Addr(), 10*time.Second)
	if err != nil {
		s.t.Logf("gmailtest: dial Dovecot: %v", err)
		return
	}
	if !s.ln.Track(up) {
		return
	}
	s.sessions.Add(1)
	f := &filter{s: s, pending: map[string]bool{}}
	s.ln.Go(func() {
		f.clientToServer(c, up)
		s.ln.Drop(c, up)
	})
	f.serverToClient(up, c)
	s.ln.Drop(c, up)
}

// Host and Port are the filter's address: plain IMAP, no STARTTLS.
func (s *Server) Host() string { return loopback.Host }

// Port is the filter's port.
func (s *Server) Port() int { return s.ln.Port() }

// User is the mailbox's owner on Dovecot, for what the harness reads or
// changes outside the filter.
func (s *Server) User() *dovecot.User { return s.user }

// Sessions counts the connections the filter accepted.
func (s *Server) Sessions() int { return int(s.sessions.Load()) }

// folderOf is the folder a label stands for: INBOX for \Inbox, the
// label's own name for a user label, "" for a system label Gmail shows
// in no folder of its own (\Important, \Starred).
func folderOf(label string) string {
	switch {
	case label == LabelInbox:
		return "INBOX"
	case strings.HasPrefix(label, `\`):
		return ""
	}
	return label
}

// Deliver places raw as one message with labels: in [Gmail]/All Mail and
// in the folder of each label that has one (created on first use), each
// under a UID of its own, all under one new X-GM-MSGID (and a thread of
// its own).
func (s *Server) Deliver(raw []byte, labels ...string) *Message {
	s.t.Helper()
	s.mu.Lock()
	s.next++
	m := &Message{MsgID: s.next, ThrID: s.next, raw: raw, labels: append([]string(nil), labels...), uids: map[string]imap.UID{}}
	s.mu.Unlock()
	s.place(m, AllMail)
	for _, l := range labels {
		if f := folderOf(l); f != "" {
			s.place(m, f)
		}
	}
	return m
}

// place appends m to folder and records the occurrence.
func (s *Server) place(m *Message, folder string) {
	s.t.Helper()
	s.ensureFolder(folder)
	uid := s.user.Append(folder, m.raw, time.Time{})
	s.mu.Lock()
	defer s.mu.Unlock()
	m.uids[folder] = uid
	s.byPlace[place{folder, s.validityLocked(folder), uid}] = m
}

func (s *Server) ensureFolder(folder string) {
	s.t.Helper()
	s.mu.Lock()
	known := folder == "INBOX" || folder == AllMail || s.folders[folder]
	s.folders[folder] = true
	s.mu.Unlock()
	if !known {
		s.user.CreateFolder(folder)
	}
}

// validityLocked is folder's UIDVALIDITY, read once.
func (s *Server) validityLocked(folder string) uint32 {
	v, ok := s.validity[folder]
	if !ok {
		v = s.user.UIDValidity(folder)
		s.validity[folder] = v
	}
	return v
}

// UID is m's UID in folder, 0 when the folder does not show it.
func (s *Server) UID(m *Message, folder string) imap.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.uids[folder]
}

// Labels are m's X-GM-LABELS.
func (s *Server) Labels(m *Message) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), m.labels...)
}

// RemoveLabel takes label from m as Gmail does: m leaves the label's
// folder, and every folder still showing it sees its mod-sequence move.
func (s *Server) RemoveLabel(m *Message, label string) {
	s.t.Helper()
	s.mu.Lock()
	i := -1
	for j, l := range m.labels {
		if l == label {
			i = j
		}
	}
	if i < 0 {
		s.mu.Unlock()
		s.t.Fatalf("gmailtest: message %d has no label %q", m.MsgID, label)
		return
	}
	m.labels = append(m.labels[:i:i], m.labels[i+1:]...)
	folder := folderOf(label)
	uid, shown := m.uids[folder]
	if shown {
		delete(m.uids, folder)
		delete(s.byPlace, place{folder, s.validity[folder], uid})
	}
	s.mu.Unlock()
	if shown {
		s.user.Expunge(folder, uid)
	}
	s.touch(m)
}

// AddLabel gives m label as Gmail does: m appears in the label's folder,
// if it has one, under a new UID, and every other folder showing it sees
// its mod-sequence move.
func (s *Server) AddLabel(m *Message, label string) {
	s.t.Helper()
	s.mu.Lock()
	m.labels = append(m.labels, label)
	s.mu.Unlock()
	s.touch(m)
	if f := folderOf(label); f != "" {
		s.place(m, f)
	}
}

// touch moves the mod-sequence of each occurrence of m, its flags left as
// they were.
func (s *Server) touch(m *Message) {
	s.t.Helper()
	s.mu.Lock()
	uids := make(map[string]imap.UID, len(m.uids))
	for f, u := range m.uids {
		uids[f] = u
	}
	s.mu.Unlock()
	for f, u := range uids {
		s.user.SetFlags(f, u, []imap.Flag{touchKeyword}, []imap.Flag{touchKeyword})
	}
}

// identify returns the message at (folder, validity, uid), recording a
// message of its own for an occurrence Deliver did not place.
func (s *Server) identify(folder string, validity uint32, uid imap.UID) *Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := place{folder, validity, uid}
	if m, ok := s.byPlace[p]; ok {
		return m
	}
	s.next++
	m := &Message{MsgID: s.next, ThrID: s.next, labels: []string{}, uids: map[string]imap.UID{folder: uid}}
	s.byPlace[p] = m
	return m
}
