package faultproxy_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
)

// TestCutMidFetchThroughDovecot cuts an implicit-TLS IMAP connection in
// the middle of a large FETCH response and checks that the client sees the
// failure, and that a reconnect through the same proxy works.
func TestCutMidFetchThroughDovecot(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t)
	u := srv.AddUser("resilience", "pw")
	body := strings.Repeat("All work and no play makes Jack a dull boy.\r\n", 100)
	msgs := make([]dovecot.SeedMessage, 200)
	for i := range msgs {
		msgs[i].Raw = fmt.Appendf(nil, "From: Jack Torrance <jack@overlook.test>\r\nTo: Wendy <wendy@overlook.test>\r\nSubject: Page %d of the manuscript\r\nMessage-ID: <%d@cut.test>\r\n\r\n%s", i, i, body)
	}
	u.SeedMaildir("INBOX", msgs)

	p := faultproxy.Start(t, srv.TLSAddr())
	dialProxy := func() *imapclient.Client {
		c, err := imapclient.DialTLS(p.Addr(), &imapclient.Options{
			TLSConfig: srv.TLSConfig(),
			Dialer:    &net.Dialer{Timeout: 5 * time.Second},
		})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		require.NoError(t, c.Login(u.Name(), u.Password()).Wait())
		_, err = c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
		require.NoError(t, err)
		return c
	}
	c := dialProxy()

	// The FETCH items are decoded by imapclient's reader goroutine, not
	// streamed as literals: go-imap v2.0.0-beta.8 has a data race (seen
	// with -race) when a connection dies while the caller reads a body
	// literal.
	before := p.Stats().ServerToClient
	p.CutAfter(faultproxy.Existing, faultproxy.ServerToClient, 20_000) // about a third of the reply
	msgsOut, err := c.Fetch(imap.SeqSet{imap.SeqRange{Start: 1, Stop: 0}}, &imap.FetchOptions{
		UID:           true,
		Envelope:      true,
		RFC822Size:    true,
		BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
	}).Collect()
	require.Error(t, err, "FETCH must fail when the connection is cut")
	require.Less(t, len(msgsOut), len(msgs))
	t.Logf("client error after %d of %d messages: %v", len(msgsOut), len(msgs), err)
	select {
	case <-c.Closed():
	case <-time.After(5 * time.Second):
		t.Fatal("client did not notice the closed connection")
	}
	st := p.Stats()
	require.Equal(t, int64(1), st.Cut)
	require.Equal(t, int64(20_000), st.ServerToClient-before)

	// The fault was for existing connections only: a reconnect works.
	c2 := dialProxy()
	all, err := c2.Fetch(imap.SeqSet{imap.SeqRange{Start: 1, Stop: 0}}, &imap.FetchOptions{
		UID:         true,
		BodySection: []*imap.FetchItemBodySection{{Peek: true}},
	}).Collect()
	require.NoError(t, err)
	require.Len(t, all, len(msgs))
}
