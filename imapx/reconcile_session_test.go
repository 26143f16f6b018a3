package imapx_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// TestReconcileSessionOneConnection: a session of OpenReconcileSession
// examines and reconciles over one connection and one login — the
// reconciliation connection, with its command set and nothing else — in
// the QRESYNC and the plain mode; Recover replaces that connection alone;
// listing, searching and fetching are refused before anything is sent.
func TestReconcileSessionOneConnection(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		opts []dovecot.Option
		mode imapx.ReconcileMode
	}{
		"QResync": {mode: imapx.QResync},
		"Plain":   {opts: []dovecot.Option{dovecot.WithCapability(capsPlain)}, mode: imapx.Plain},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var srv *dovecot.Server
			if tc.opts != nil {
				srv = dovecot.Start(t, tc.opts...)
			}
			b := setup(t, srv)
			uids := toUint32(b.user.SeedMaildir("INBOX", seedMessages(3)))
			b.user.SetFlags("INBOX", imap.UID(uids[1]), []imap.Flag{imap.FlagFlagged}, nil)
			// Dovecot's log process writes a login's line a moment after it.
			logins := func(want int) {
				t.Helper()
				poll.Until(t, dovecot.LogWait, fmt.Sprintf("Dovecot logged %d logins", want), func() (bool, string) {
					got := strings.Count(b.srv.Log(), "Login: user=<"+b.user.Name()+">")
					return got == want, fmt.Sprintf("%d logins", got)
				})
			}

			var log wireLog
			ep := b.endpoint(imapx.None)
			ep.Dial = log.dial("")
			s, err := imapx.OpenReconcileSession(b.ctx, ep, imapx.SessionOptions{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			st, err := s.Examine(b.ctx, "INBOX")
			require.NoError(t, err)
			require.NotZero(t, st.UIDValidity)
			require.EqualValues(t, 3, st.Exists)
			require.Equal(t, tc.mode != imapx.Plain, st.HighestModSeq > 0)
			ans, err := s.Reconcile(b.ctx, uids, 0)
			require.NoError(t, err)
			require.Equal(t, tc.mode, ans.Mode)
			require.Equal(t, uids, ans.Present)
			require.Len(t, ans.Changed, 3)
			require.Equal(t, `\Flagged`, flagsOf(ans.Changed[1].Flags))
			existing, err := s.ExistingUIDs(b.ctx, uids)
			require.NoError(t, err)
			require.Equal(t, uids, existing)

			_, err = s.ListFolders(b.ctx)
			require.ErrorIs(t, err, imapx.ErrReconcileOnly)
			_, err = s.SearchUIDs(b.ctx, 0, timeZero)
			require.ErrorIs(t, err, imapx.ErrReconcileOnly)
			err = s.FetchBodies(b.ctx, uids, 1<<20, func(imapx.Body) error { return nil })
			require.ErrorIs(t, err, imapx.ErrReconcileOnly)

			log.mu.Lock()
			conns := slices.Clone(log.conns)
			log.mu.Unlock()
			require.Len(t, conns, 1, "one connection examines and reconciles")
			logins(1)
			cmds := requireReconciliationWire(t, conns[0])
			require.Equal(t, tc.mode == imapx.QResync, contains(cmds, "ENABLE QRESYNC"))
			require.False(t, contains(cmds, "LIST") || contains(cmds, "BODY"), "refused calls send nothing: %q", cmds)

			// Recover replaces the one connection and re-examines there.
			again, err := s.Recover(b.ctx)
			require.NoError(t, err)
			require.Equal(t, st.UIDValidity, again.UIDValidity)
			ans, err = s.Reconcile(b.ctx, uids, 0)
			require.NoError(t, err)
			require.Equal(t, uids, ans.Present)
			require.NoError(t, s.Close())
			log.mu.Lock()
			conns = slices.Clone(log.conns)
			log.mu.Unlock()
			require.Len(t, conns, 2)
			cmds = requireReconciliationWire(t, conns[1])
			require.True(t, contains(cmds, " EXAMINE "), "Recover examines the folder on the new connection")
			require.True(t, contains(cmds[len(cmds)-1:], "LOGOUT"))
			logins(2)
			b.requireUnseen("INBOX", uids...)
		})
	}
}
