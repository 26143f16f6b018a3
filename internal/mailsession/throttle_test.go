package mailsession_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
)

// throttlingServer is a scripted server whose every connection throttles
// at the step stage names: "greeting" (a BYE greeting), "login" (a NO to
// AUTHENTICATE), or "fetch" (a BYE after the first message of a body
// fetch). Dovecot cannot be made to throttle, so the scripted server
// plays it.
func throttlingServer(t *testing.T, stage string) *imapscript.Server {
	const body = "Subject: hi\r\n\r\nbody\r\n"
	return imapscript.Start(t, func(c *imapscript.Conn) {
		if stage == "greeting" {
			c.Send("* BYE [UNAVAILABLE] come back later")
			return
		}
		c.Greet("IMAP4rev1 SASL-IR AUTH=PLAIN")
		tag, _, _, ok := c.Authenticate()
		if !ok {
			return
		}
		if stage == "login" {
			c.Send(tag + " NO [ALERT] Too many simultaneous connections. (Failure)")
			c.Serve()
			return
		}
		c.Send(tag + " OK [CAPABILITY IMAP4rev1] logged in")
		for {
			line, ok := c.ReadLine()
			if !ok {
				return
			}
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch strings.ToUpper(f[1]) {
			case "EXAMINE":
				c.Send("* 3 EXISTS", "* OK [UIDVALIDITY 7] ok", "* OK [UIDNEXT 4] ok", f[0]+" OK [READ-ONLY] done")
			case "UID":
				c.Send("* 1 FETCH (UID 1 BODY[] {"+strconv.Itoa(len(body))+"}\r\n"+body+")",
					"* BYE [ALERT] Account exceeded command or bandwidth limits")
				return
			case "LOGOUT":
				c.Send("* BYE bye", f[0]+" OK done")
				return
			default:
				c.Send(f[0] + " BAD not scripted")
			}
		}
	})
}

// TestThrottledAnswersAreNotRepeated: a server that throttles is asked
// once — not again at once by the establishment or the retrieval
// pipeline, which would be the tight loop the server asked to be spared —
// and its answer reaches the caller as the throttle it is, not as an
// unavailable mailbox; neither does it open the account's circuit, which
// would turn the next unit's work into failures.
func TestThrottledAnswersAreNotRepeated(t *testing.T) {
	t.Parallel()
	for _, stage := range []string{"greeting", "login"} {
		t.Run("Establishment/"+stage, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, nil)
			srv := throttlingServer(t, stage)
			ep := b.endpoint(t, srv.Addr())
			ep.PermittedMechanisms = []sasl.Mechanism{sasl.Plain}
			minThroughput := resilience.DefaultBudgets()[resilience.MailboxSessionEstablishment].CircuitBreakerMinimumThroughput
			for i := 1; i <= minThroughput+2; i++ {
				_, err := mailsession.Open(b.ctx, b.registry, "acct", resilience.OperationFolderDiscovery, ep, opener)
				_, throttled := imapx.AsThrottled(err)
				require.True(t, throttled, "attempt %d: %v", i, err)
				require.False(t, mailsession.IsMailboxUnavailable(err), "%v", err)
				require.False(t, failure.IsDependencyUnavailable(err), "the circuit stays closed: %v", err)
				require.Equal(t, i, srv.Connections(), "one connection per establishment")
			}
			require.NotContains(t, b.logs.String(), "retry scheduled")
			require.NotContains(t, b.logs.String(), "outbound circuit opened")
		})
	}

	t.Run("RetrievalByeMidFetch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		srv := throttlingServer(t, "fetch")
		ep := b.endpoint(t, srv.Addr())
		ep.PermittedMechanisms = []sasl.Mechanism{sasl.Plain}
		s := b.open(t, "acct", ep)
		_, err := s.Examine(b.ctx, "INBOX")
		require.NoError(t, err)
		var got []uint32
		err = s.FetchBodies(b.ctx, []uint32{1, 2, 3}, 1<<20, func(body imapx.Body) error {
			got = append(got, body.UID)
			return nil
		})
		th, throttled := imapx.AsThrottled(err)
		require.True(t, throttled, "%v", err)
		require.Equal(t, imapx.ThrottleBandwidthExceeded, th.Reason)
		require.False(t, mailsession.IsMailboxUnavailable(err))
		require.Equal(t, []uint32{1}, got, "what arrived before the BYE is delivered")
		require.Equal(t, 1, srv.Connections(), "the session was not re-established to ask again")
		require.Zero(t, s.Recoveries())
		require.Equal(t, 1, strings.Count(b.rec.String(), "UID FETCH"))
		require.NotContains(t, b.logs.String(), "retry scheduled")
	})
}
