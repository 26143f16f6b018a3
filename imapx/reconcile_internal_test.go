package imapx

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scriptedIMAP is a scripted IMAP server for what Dovecot cannot be made to
// do: answers without FLAGS, malformed or hostile responses, expunges in
// the middle of a pass. Every connection the endpoint dials gets its own
// net.Pipe and goroutine; the session's own connection and the
// reconciliation connection both talk to it. Commands it is not told about
// are answered as a small, well-behaved server would.
type scriptedIMAP struct {
	t    *testing.T
	caps string // advertised after login
	// folder state reported by EXAMINE
	uidValidity   uint32
	highestModSeq uint64 // 0: no HIGHESTMODSEQ; noModSeq sends NOMODSEQ
	noModSeq      bool
	enable        string // the ENABLE answer's untagged line, "" for none
	enableStatus  string // "OK" unless set
	// answer writes the responses to a UID FETCH or UID SEARCH (verb) of
	// the reconciliation connection, without the tagged completion; it
	// returns the completion's status ("" for OK).
	answer func(c *scriptedConn, tag, verb, args string) string

	mu       sync.Mutex
	commands []string
	wg       sync.WaitGroup
}

type scriptedConn struct {
	conn net.Conn
	br   *bufio.Reader
}

// send writes raw as is.
func (c *scriptedConn) send(raw string) { _, _ = io.WriteString(c.conn, raw) }

// line writes one response line.
func (c *scriptedConn) line(s string) { c.send(s + "\r\n") }

func newScripted(t *testing.T, caps string) *scriptedIMAP {
	return &scriptedIMAP{t: t, caps: caps, uidValidity: 7, highestModSeq: 100, enable: "* ENABLED QRESYNC"}
}

func (s *scriptedIMAP) endpoint() Endpoint {
	var conns []net.Conn
	var mu sync.Mutex
	s.t.Cleanup(func() {
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		s.wg.Wait()
	})
	return Endpoint{
		Host: "scripted.invalid", Port: 143, Security: None, Username: "someone@example.test",
		AllowInsecureConnection:       true,
		AllowClearTextOverUnencrypted: true,
		Password:                      func(context.Context) ([]byte, error) { return []byte("pw"), nil },
		Dial: func(context.Context, string, string) (net.Conn, error) {
			client, server := net.Pipe()
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer server.Close()
				s.serve(&scriptedConn{conn: server, br: bufio.NewReader(server)})
			}()
			return client, nil
		},
	}
}

func (s *scriptedIMAP) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

func (s *scriptedIMAP) serve(c *scriptedConn) {
	c.line("* OK [CAPABILITY IMAP4rev1 SASL-IR AUTH=PLAIN] scripted ready")
	for {
		raw, err := c.br.ReadString('\n')
		if err != nil {
			return
		}
		line := strings.TrimRight(raw, "\r\n")
		s.mu.Lock()
		s.commands = append(s.commands, line)
		s.mu.Unlock()
		tag, rest, _ := strings.Cut(line, " ")
		verb, args, _ := strings.Cut(rest, " ")
		verb = strings.ToUpper(verb)
		if verb == "UID" {
			var sub string
			sub, args, _ = strings.Cut(args, " ")
			verb += " " + strings.ToUpper(sub)
		}
		switch verb {
		case "AUTHENTICATE":
			c.line(tag + " OK [CAPABILITY " + strings.TrimSpace("IMAP4rev1 "+s.caps) + "] logged in")
		case "CAPABILITY":
			c.line("* CAPABILITY " + strings.TrimSpace("IMAP4rev1 "+s.caps))
			c.line(tag + " OK done")
		case "ENABLE":
			if s.enable != "" {
				c.line(s.enable)
			}
			st := s.enableStatus
			if st == "" {
				st = "OK"
			}
			c.line(tag + " " + st + " enable")
		case "EXAMINE", "SELECT":
			c.line("* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)")
			c.line("* 5 EXISTS")
			c.line("* 0 RECENT")
			c.line(fmt.Sprintf("* OK [UIDVALIDITY %d] UIDs valid", s.uidValidity))
			c.line("* OK [UIDNEXT 6] next")
			if s.noModSeq {
				c.line("* OK [NOMODSEQ] no mod-sequences")
			} else if s.highestModSeq > 0 {
				c.line(fmt.Sprintf("* OK [HIGHESTMODSEQ %d] highest", s.highestModSeq))
			}
			c.line(tag + " OK [READ-ONLY] examined")
		case "UID FETCH", "UID SEARCH":
			st := "OK"
			if s.answer != nil {
				if got := s.answer(c, tag, verb, args); got != "" {
					st = got
				}
			}
			if st == "-" {
				return // hang up without completing
			}
			c.line(tag + " " + st + " done")
		case "LOGOUT":
			c.line("* BYE bye")
			c.line(tag + " OK done")
			return
		default:
			c.line(tag + " BAD unexpected")
		}
	}
}

func openScripted(t *testing.T, s *scriptedIMAP) *ReadSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := OpenReconcileSession(ctx, s.endpoint(), SessionOptions{CommandTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close() })
	_, err = sess.Examine(ctx, "INBOX")
	require.NoError(t, err)
	return sess
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fiveFlags answers a UID FETCH of 1:5 for every UID.
func fiveFlags(c *scriptedConn) {
	for uid := 1; uid <= 5; uid++ {
		c.line(fmt.Sprintf("* %d FETCH (UID %d FLAGS (\\Seen) MODSEQ (%d))", uid, uid, 90+uid))
	}
}

// TestReconcileRefusesAnswerWithoutFlags: a FETCH response naming a window
// UID without FLAGS fails the pass instead of reading as silence; the
// connection stays usable.
func TestReconcileRefusesAnswerWithoutFlags(t *testing.T) {
	for _, caps := range []string{"", "CONDSTORE", "CONDSTORE QRESYNC ENABLE"} {
		t.Run(caps, func(t *testing.T) {
			srv := newScripted(t, caps)
			broken := true
			srv.answer = func(c *scriptedConn, tag, verb, args string) string {
				switch {
				case verb == "UID SEARCH":
					c.line("* SEARCH 1 2 3 4 5")
				case broken:
					c.line("* 1 FETCH (UID 1 FLAGS (\\Seen))")
					c.line("* 2 FETCH (UID 2 MODSEQ (12))")
				default:
					fiveFlags(c)
				}
				return ""
			}
			s := openScripted(t, srv)
			for _, since := range []uint64{0, 50} {
				broken = true
				_, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, since)
				require.ErrorIs(t, err, ErrIncompleteAnswer)
				require.False(t, IsTransient(err))
				broken = false
				ans, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, since)
				require.NoError(t, err, "the connection is still usable")
				require.Equal(t, []uint32{1, 2, 3, 4, 5}, ans.Present)
			}
		})
	}
}

// TestReconcileRefusesUnansweredSearch: in CondStore mode a UID SEARCH that
// completes without any SEARCH response has not said which UIDs exist.
func TestReconcileRefusesUnansweredSearch(t *testing.T) {
	srv := newScripted(t, "CONDSTORE")
	srv.answer = func(c *scriptedConn, tag, verb, args string) string { return "" }
	s := openScripted(t, srv)
	_, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3}, 50)
	require.ErrorIs(t, err, ErrIncompleteAnswer)
	_, err = s.ExistingUIDs(testCtx(t), []uint32{1, 2, 3})
	require.ErrorIs(t, err, ErrIncompleteAnswer)

	// An empty answer is an answer: nothing exists.
	srv.answer = func(c *scriptedConn, tag, verb, args string) string {
		if verb == "UID SEARCH" {
			c.line("* SEARCH")
		}
		return ""
	}
	ans, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3}, 50)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 3}, ans.Vanished)
}

// TestReconcileESearch: RETURN (ALL) is used where ESEARCH is advertised,
// the answer correlated by tag, and an ESEARCH without UID refused.
func TestReconcileESearch(t *testing.T) {
	srv := newScripted(t, "CONDSTORE ESEARCH")
	var answer string
	srv.answer = func(c *scriptedConn, tag, verb, args string) string {
		if verb == "UID SEARCH" {
			require.True(t, strings.HasPrefix(args, "RETURN (ALL) UID "), args)
			c.line(`* ESEARCH (TAG "X99") UID ALL 1:5`) // another command's answer
			c.line(strings.ReplaceAll(answer, "{tag}", tag))
		}
		return ""
	}
	s := openScripted(t, srv)
	answer = `* ESEARCH (TAG "{tag}") UID ALL 1,3:4`
	ans, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, 50)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 3, 4}, ans.Present)
	require.Equal(t, []uint32{2, 5}, ans.Vanished)

	answer = `* ESEARCH (TAG "{tag}") ALL 1:5`
	_, err = s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, 50)
	require.ErrorIs(t, err, ErrProtocolViolation, "sequence numbers are not UIDs")
}

// TestReconcileLiteralCannotDesynchronize: a literal in a FETCH response is
// consumed by its length, even when its content looks like the command's
// completion.
func TestReconcileLiteralCannotDesynchronize(t *testing.T) {
	srv := newScripted(t, "")
	srv.answer = func(c *scriptedConn, tag, verb, args string) string {
		fake := tag + " OK done\r\n* 2 FETCH (UID 2"
		c.send(fmt.Sprintf("* 1 FETCH (UID 1 X-ODD {%d}\r\n%s FLAGS (\\Flagged))\r\n", len(fake), fake))
		c.send("* 2 FETCH (UID 2 BODY[HEADER.FIELDS (\"SUBJECT\" DATE)] {3}\r\nx)\r FLAGS ())\r\n")
		c.send(fmt.Sprintf("* 9 STATUS odd {%d}\r\n%s OK\r\n", len(tag)+3, tag))
		return ""
	}
	s := openScripted(t, srv)
	ans, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3}, 0)
	require.NoError(t, err)
	require.Equal(t, []FlagAnswer{{UID: 1, Flags: []string{`\Flagged`}}, {UID: 2, Flags: []string{}}}, ans.Changed)
	require.Equal(t, []uint32{3}, ans.Vanished)
}

// TestReconcileMalformedResponse: a response the decoder cannot parse ends
// the connection with a transient error naming no server bytes; the session
// fails fast until Recover, which opens a new reconciliation connection.
func TestReconcileMalformedResponse(t *testing.T) {
	for name, raw := range map[string]string{
		"garbage":         "* 1 FETCH (UID 1 FLAGS (\\Seen)\r\n",
		"unknown tag":     "Z9 OK secret-text\r\n",
		"continuation":    "+ go ahead\r\n",
		"huge literal":    "* 1 FETCH (UID 1 BODY[] {999999999}\r\n",
		"nesting":         "* 1 FETCH (UID 1 X " + strings.Repeat("(", 100) + "\r\n",
		"long line":       "* OK " + strings.Repeat("x", 64<<10+10) + "\r\n", // beyond the decoder's bound on a text
		"UID above 32bit": "* 1 FETCH (UID 4294967296 FLAGS ())\r\n",
		"NUL":             "* 1 FETCH (UID 1 FLAGS (\x00))\r\n",
		"modseq 64 bits":  "* 1 FETCH (UID 1 FLAGS () MODSEQ (18446744073709551615))\r\n",
		"vanished star":   "* VANISHED (EARLIER) 1:*\r\n",
		"BYE":             "* BYE going away\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			srv := newScripted(t, "CONDSTORE QRESYNC")
			hostile := true
			srv.answer = func(c *scriptedConn, tag, verb, args string) string {
				if !hostile {
					fiveFlags(c)
					return ""
				}
				c.send(raw)
				return "-"
			}
			s := openScripted(t, srv)
			_, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, 50)
			require.True(t, IsTransient(err), "%v", err)
			var trErr *TransportError
			require.ErrorAs(t, err, &trErr)
			require.NotContains(t, err.Error(), "secret")
			if name != "BYE" {
				require.ErrorIs(t, err, ErrMalformedResponse)
			}
			_, err = s.Reconcile(testCtx(t), []uint32{1}, 50)
			require.True(t, IsTransient(err), "fails fast: %v", err)

			hostile = false
			_, err = s.Recover(testCtx(t))
			require.NoError(t, err)
			ans, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, 0)
			require.NoError(t, err)
			require.Len(t, ans.Present, 5)
		})
	}
}

// TestReconcileExpungeBySequenceNumber: an EXPUNGE during the pass says a
// message left without saying which; one UID SEARCH settles it.
func TestReconcileExpungeBySequenceNumber(t *testing.T) {
	srv := newScripted(t, "")
	searches := 0
	srv.answer = func(c *scriptedConn, tag, verb, args string) string {
		if verb == "UID SEARCH" {
			searches++
			require.Equal(t, "UID 1:5", args)
			c.line("* SEARCH 1 2 4 5")
			return ""
		}
		fiveFlags(c)
		c.line("* 3 EXPUNGE")
		return ""
	}
	s := openScripted(t, srv)
	ans, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, 0)
	require.NoError(t, err)
	require.Equal(t, 1, searches)
	require.Equal(t, []uint32{1, 2, 4, 5}, ans.Present)
	require.Equal(t, []uint32{3}, ans.Vanished)
	require.Len(t, ans.Changed, 4)
}

// TestReconcileVanished: VANISHED (EARLIER) with ranges, an unsolicited
// VANISHED during the fetch, and an over-broad report that ExistingUIDs
// (the misreport guard's confirmation) contradicts.
func TestReconcileVanished(t *testing.T) {
	srv := newScripted(t, "CONDSTORE QRESYNC ENABLE")
	report := "* VANISHED (EARLIER) 2:3,41,5"
	srv.answer = func(c *scriptedConn, tag, verb, args string) string {
		if verb == "UID SEARCH" {
			c.line("* SEARCH 1 2 3 4 5")
			return ""
		}
		require.True(t, strings.HasSuffix(args, "(FLAGS UID MODSEQ) (CHANGEDSINCE 50 VANISHED)"), args)
		c.line(report)
		c.line("* 1 FETCH (UID 1 FLAGS (\\Answered) MODSEQ (60))")
		c.line("* VANISHED 4")
		return ""
	}
	s := openScripted(t, srv)
	require.Equal(t, QResync, s.ReconcileMode())
	ans, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, 50)
	require.NoError(t, err)
	require.Equal(t, QResync, ans.Mode)
	require.Equal(t, []uint32{1}, ans.Present)
	require.Equal(t, []uint32{2, 3, 4, 5}, ans.Vanished)
	require.Equal(t, []FlagAnswer{{UID: 1, Flags: []string{`\Answered`}, ModSeq: 60}}, ans.Changed)
	require.Equal(t, uint64(100), ans.HighestModSeq)

	report = "* VANISHED (EARLIER) 1:4294967295"
	ans, err = s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, 50)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, ans.Vanished, "parsed as one range, not expanded")
	confirmed, err := s.ExistingUIDs(testCtx(t), ans.Vanished)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, confirmed, "the search contradicts the report")

	cmds := srv.received()
	enable := indexOf(cmds, "R1 ENABLE QRESYNC")
	require.Equal(t, 0, enable-indexOf(cmds, "R1 "), "ENABLE is the first reconciliation command")
	require.Less(t, enable, indexOf(cmds, "R2 EXAMINE"))
}

func indexOf(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return -1
}

// TestReconcileModeFallbacks: a refused ENABLE QRESYNC leaves CondStore; a
// folder without mod-sequences is asked the plain question.
func TestReconcileModeFallbacks(t *testing.T) {
	t.Run("ENABLE refused", func(t *testing.T) {
		srv := newScripted(t, "CONDSTORE QRESYNC")
		srv.enable, srv.enableStatus = "", "NO"
		srv.answer = func(c *scriptedConn, tag, verb, args string) string {
			if verb == "UID SEARCH" {
				c.line("* SEARCH 1")
				return "BAD"
			}
			require.NotContains(t, args, "VANISHED")
			return ""
		}
		s := openScripted(t, srv)
		require.Equal(t, CondStore, s.ReconcileMode(), "the connection is open and QRESYNC was refused")
		_, err := s.Reconcile(testCtx(t), []uint32{1}, 50)
		var cmdErr *CommandError
		require.ErrorAs(t, err, &cmdErr)
		require.Equal(t, "UID SEARCH", cmdErr.Command)
		require.Equal(t, CondStore, s.ReconcileMode())
		require.Contains(t, srv.received(), `R2 EXAMINE "INBOX" (CONDSTORE)`)
	})
	t.Run("ENABLED without QRESYNC", func(t *testing.T) {
		srv := newScripted(t, "CONDSTORE QRESYNC")
		srv.enable = "* ENABLED"
		s := openScripted(t, srv)
		srv.answer = func(c *scriptedConn, tag, verb, args string) string {
			if verb == "UID SEARCH" {
				c.line("* SEARCH 1")
			}
			return ""
		}
		ans, err := s.Reconcile(testCtx(t), []uint32{1}, 50)
		require.NoError(t, err)
		require.Equal(t, CondStore, ans.Mode)
	})
	t.Run("NOMODSEQ", func(t *testing.T) {
		srv := newScripted(t, "CONDSTORE QRESYNC")
		srv.noModSeq = true
		srv.answer = func(c *scriptedConn, tag, verb, args string) string {
			require.Equal(t, "UID FETCH", verb)
			require.Equal(t, "1:5 (FLAGS UID)", args)
			fiveFlags(c)
			return ""
		}
		s := openScripted(t, srv)
		ans, err := s.Reconcile(testCtx(t), []uint32{1, 2, 3, 4, 5}, 50)
		require.NoError(t, err)
		require.Equal(t, Plain, ans.Mode)
		require.False(t, ans.Narrowed)
		require.Zero(t, ans.HighestModSeq)
		require.Len(t, ans.Changed, 5)
	})
}

// TestReconcileUIDValidityMismatch: the reconciliation connection sees
// another UIDVALIDITY than the session examined.
func TestReconcileUIDValidityMismatch(t *testing.T) {
	srv := newScripted(t, "")
	s := openScripted(t, srv)
	srv.uidValidity = 8
	_, err := s.Reconcile(testCtx(t), []uint32{1}, 0)
	require.ErrorIs(t, err, ErrMailboxFolderRecreated)
	_, err = s.SearchUIDs(testCtx(t), 0, time.Time{})
	require.ErrorIs(t, err, ErrMailboxFolderRecreated)
}
