package mailsession_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

func watchOpener(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error) {
	return imapx.OpenWatchSession(ctx, ep, imapx.SessionOptions{CommandTimeout: 5 * time.Second})
}

// TestOpenWatchAbandonsWhatAnAbandonedAttemptOpened: a watching session is
// established under the establishment pipeline like a read session; the
// one an abandoned attempt opened is shut without a LOGOUT, the accepted
// one watches.
func TestOpenWatchAbandonsWhatAnAbandonedAttemptOpened(t *testing.T) {
	t.Parallel()
	budgets := fastBudgets()
	e := budgets[resilience.MailboxSessionEstablishment]
	e.AttemptTimeout = 2 * time.Second
	budgets[resilience.MailboxSessionEstablishment] = e
	b := setup(t, nil, budgets)
	var opened []*imapx.WatchSession
	slow := func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error) {
		s, err := watchOpener(context.WithoutCancel(ctx), ep)
		if err == nil {
			opened = append(opened, s)
		}
		if len(opened) == 1 {
			<-ctx.Done() // the first one opens as its attempt is abandoned
		}
		return s, err
	}
	s, err := mailsession.OpenWatch(b.ctx, b.registry, "acct", "inbox", b.endpoint(t, ""), slow)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.Len(t, opened, 2, "one abandoned attempt, then the one accepted")
	require.False(t, opened[0].Usable(), "the abandoned attempt's session was shut")
	_, err = s.WatchFolder(b.ctx, "INBOX")
	require.NoError(t, err, "the accepted one watches")
	require.Equal(t, 0, strings.Count(b.rec.String(), "LOGOUT"), "an abandoned session is shut without a LOGOUT")
}

// TestOpenWatchUnreachableIsMailboxUnavailable: a transient failure that
// survives the pipeline's attempts is a MailboxUnavailableError.
func TestOpenWatchUnreachableIsMailboxUnavailable(t *testing.T) {
	t.Parallel()
	budgets := fastBudgets()
	e := budgets[resilience.MailboxSessionEstablishment]
	e.MaxAttempts = 2
	budgets[resilience.MailboxSessionEstablishment] = e
	b := setup(t, nil, budgets)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = mailsession.OpenWatch(b.ctx, b.registry, "acct", "push-watch", b.endpoint(t, dead), watchOpener)
	require.True(t, mailsession.IsMailboxUnavailable(err), "%v", err)
	require.Contains(t, err.Error(), "[MailboxUnavailable]")
}
