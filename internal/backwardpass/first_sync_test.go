package backwardpass_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/backwardpass"
	"github.com/mailfathom/mailfathom/internal/forwardpass"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
	"github.com/mailfathom/mailfathom/mimex"
)

// firstSyncOptions bound each forward pass of a first synchronization to
// 500 messages, as the product's defaults bound it to 1000: a folder
// larger than that is synchronized over several passes.
var firstSyncOptions = forwardpass.Options{BatchSize: 100, BatchesPerRun: 5, MaxRawMimeBytes: 1 << 20,
	Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000}}

// forward runs one forward pass with firstSyncOptions.
func (b *testBundle) forward(t testing.TB, sess forwardpass.Session) forwardpass.Report {
	t.Helper()
	rep, err := forwardpass.Run(b.ctx, b.conn, sess, b.binding, firstSyncOptions, b.logger)
	require.NoError(t, err)
	return rep
}

// forwardUntilDone runs forward passes until one leaves no work behind and
// returns their reports; between passes it calls between, when set, with
// the number of passes run so far.
func (b *testBundle) forwardUntilDone(t testing.TB, sess forwardpass.Session, between func(n int)) []forwardpass.Report {
	t.Helper()
	var reps []forwardpass.Report
	for {
		rep := b.forward(t, sess)
		reps = append(reps, rep)
		if !rep.More {
			return reps
		}
		require.Nil(t, b.checkpoint(t).HighestModSeq, "pass %d left work behind but recorded a sequence", len(reps))
		if between != nil {
			between(len(reps))
		}
	}
}

// reflectedWithin runs backward passes with window until done reports
// true, and returns how many it took; it fails the test after most.
func (b *testBundle) reflectedWithin(t testing.TB, sess backwardpass.Session, window, most int, done func() bool) []backwardpass.Report {
	t.Helper()
	var reps []backwardpass.Report
	for len(reps) < most {
		rep := b.pass(t, sess, window)
		reps = append(reps, rep)
		if done() {
			return reps
		}
	}
	t.Fatalf("not reflected within %d windows of %d: %+v", most, window, reps)
	return nil
}

// TestFirstSynchronizationIsTheFirstCycle: a folder larger than the window
// and than one forward pass is synchronized for the first time; the
// forward passes begin a reconciliation cycle with the sequence of the
// first one's EXAMINE and the last one completes it, so a flag change and
// an expunge far from where any window would stand, and a flag changed
// mid-synchronization on mail already stored, are all reflected by the
// first window after it. Without modification sequences windows walk the
// folder as before, in the order its flags were observed, and record
// nothing.
func TestFirstSynchronizationIsTheFirstCycle(t *testing.T) {
	t.Parallel()
	const (
		messages = 1200
		window   = 500
	)
	for name, tc := range map[string]struct {
		capability string // empty: the shared Dovecot, which offers QRESYNC
		mode       string
		// reconcile: the windows ask over a session of
		// OpenReconcileSession rather than the read session.
		reconcile bool
	}{
		"QResync":     {"", "QRESYNC", true},
		"ReadSession": {"", "CONDSTORE", false},
		"CondStore":   {"IMAP4rev1 LITERAL+ SASL-IR AUTH=PLAIN CONDSTORE ESEARCH", "CONDSTORE", false},
		"Plain":       {"IMAP4rev1 LITERAL+ SASL-IR AUTH=PLAIN", "FLAGS", false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var srv *dovecot.Server
			if tc.capability != "" {
				srv = dovecot.Start(t, dovecot.WithCapability(tc.capability))
			}
			b := setup(t, srv, messages)
			sess := b.open(t)
			began := b.user.HighestModSeq(folder)

			reps := b.forwardUntilDone(t, sess, func(n int) {
				if n == 1 {
					// Mail the first pass stored changes while the
					// synchronization goes on.
					b.user.SetFlags(folder, 5, []imap.Flag{imap.FlagAnswered}, nil)
				}
			})
			require.Greater(t, len(reps), 2, "the first synchronization takes several passes")
			cp := b.checkpoint(t)
			require.Equal(t, uint32(messages), cp.LastSeenUID)
			require.Nil(t, cp.Cycle)

			// Old mail changes after the first synchronization, beyond
			// the first two windows' worth of UIDs.
			b.user.SetFlags(folder, 1100, []imap.Flag{imap.FlagFlagged}, nil)
			b.user.Expunge(folder, 950)
			reflected := func() bool {
				return b.local(t, 1100) == `\Flagged` && b.local(t, 950) == ` [tombstone]` && b.local(t, 5) == `\Answered`
			}

			if tc.mode == "FLAGS" {
				for _, rep := range reps {
					require.Empty(t, rep.Cycle)
				}
				require.Nil(t, cp.HighestModSeq)
				// Every row was observed by its fetch, so the windows
				// walk the folder oldest observation first, a whole
				// window at a time: ceil(1200/500) windows reach all of it.
				for _, rep := range b.reflectedWithin(t, sess, window, 3, reflected) {
					require.False(t, rep.Narrowed)
					require.Equal(t, "FLAGS", rep.Mode)
					require.Equal(t, window, rep.Window, "without sequences a pass costs one window")
					require.Empty(t, rep.Cycle)
				}
				cp = b.checkpoint(t)
				require.Nil(t, cp.HighestModSeq)
				require.Nil(t, cp.Cycle)
				return
			}

			b.tap.Reset()
			got := b.reflectedWithin(t, b.backward(t, sess, tc.reconcile), window, 2, reflected)
			require.Len(t, got, 1, "the first window after the synchronization reflects the changes")
			require.NotNil(t, cp.HighestModSeq, "the first synchronization completed the first cycle")
			require.Equal(t, began, *cp.HighestModSeq, "the sequence of the first pass's EXAMINE, before its first fetch")
			require.Equal(t, "started", reps[0].Cycle)
			for _, rep := range reps[1 : len(reps)-1] {
				require.Empty(t, rep.Cycle)
			}
			require.Equal(t, "completed", reps[len(reps)-1].Cycle)
			require.True(t, got[0].Narrowed)
			require.Equal(t, tc.mode, got[0].Mode)
			require.Equal(t, 1, got[0].Tombstoned)
			require.Equal(t, 2, got[0].Refreshed)
			require.Equal(t, b.user.HighestModSeq(folder), *b.checkpoint(t).HighestModSeq)
			for _, l := range b.tap.Lines() {
				require.False(t, wiretap.Forbidden(l), l)
			}
			for _, uid := range []imap.UID{1, 5, 1100, messages} {
				require.NotContains(t, b.user.Flags(folder, uid), imap.FlagSeen, "UID %d", uid)
			}
		})
	}
}

// killingSession ends the pass's context when the forward pass asks for
// the content of a UID above after: the process dying part-way through a
// pass.
type killingSession struct {
	forwardpass.Session
	after uint32
	kill  context.CancelFunc
}

func (s killingSession) FetchBodies(ctx context.Context, uids []uint32, maxBytes int64, fn func(imapx.Body) error) error {
	if len(uids) > 0 && uids[0] > s.after {
		s.kill()
		return ctx.Err()
	}
	return s.Session.FetchBodies(ctx, uids, maxBytes, fn)
}

// TestFirstSynchronizationKilledPartWayRecordsNoSequence: a forward pass
// killed part-way through a first synchronization leaves the cycle it
// began in progress and records no sequence, which would claim the UIDs it
// never read; the pass that resumes walks to the end and completes that
// cycle with its first sequence, so a change made after the kill to mail
// stored before it is still asked about.
func TestFirstSynchronizationKilledPartWayRecordsNoSequence(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, 1200)
	began := b.user.HighestModSeq(folder)

	ctx, kill := context.WithCancel(b.ctx)
	defer kill()
	// The kill takes the database connection with it, as a process dying
	// would.
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	opts := firstSyncOptions
	opts.BatchesPerRun = 100 // one pass would walk the whole folder
	_, err = forwardpass.Run(ctx, conn, killingSession{Session: b.open(t), after: 700, kill: kill}, b.binding, opts, b.logger)
	conn.Release()
	require.ErrorIs(t, err, context.Canceled)

	cp := b.checkpoint(t)
	require.Greater(t, cp.LastSeenUID, uint32(0))
	require.Less(t, cp.LastSeenUID, uint32(1200))
	require.Nil(t, cp.HighestModSeq, "a pass killed part-way records no sequence")
	require.NotNil(t, cp.Cycle, "the cycle the pass began stays in progress")
	require.Equal(t, began, cp.Cycle.ModSeq)

	b.user.SetFlags(folder, 50, []imap.Flag{imap.FlagFlagged}, nil)
	sess := b.open(t)
	reps := b.forwardUntilDone(t, sess, nil)
	require.Empty(t, reps[0].Cycle, "the resumed pass carries on the cycle rather than beginning one")
	require.Equal(t, "completed", reps[len(reps)-1].Cycle)
	cp = b.checkpoint(t)
	require.Equal(t, began, *cp.HighestModSeq, "the sequence the cycle began with, not the current one")

	rep := b.pass(t, sess, 500)
	require.True(t, rep.Narrowed)
	require.Equal(t, `\Flagged`, b.local(t, 50))
}

// TestFirstSynchronizationCycleEndsWithTheUIDSpace: a folder recreated
// under another UIDVALIDITY during its first synchronization drops the
// cycle in progress, and one recreated after it drops the recorded
// sequence; the new UID space's own first synchronization is its first
// cycle.
func TestFirstSynchronizationCycleEndsWithTheUIDSpace(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, 700)
	rep := b.forward(t, b.open(t))
	require.True(t, rep.More)
	require.Equal(t, "started", rep.Cycle)
	require.NotNil(t, b.checkpoint(t).Cycle)

	// Recreated during the first synchronization.
	recreated := time.Now()
	validity := b.user.RecreateFolder(folder)
	b.seed(t, 1000, 600)
	began := b.user.HighestModSeq(folder)
	sess := b.open(t)
	rep = b.forward(t, sess)
	require.True(t, rep.ProgressReset)
	require.True(t, rep.More)
	require.Equal(t, "started", rep.Cycle, "the new UID space begins a cycle of its own")
	cp := b.checkpoint(t)
	require.Equal(t, validity, cp.UIDValidity)
	require.Equal(t, began, cp.Cycle.ModSeq)
	require.True(t, cp.Cycle.StartedAt.After(recreated), "the abandoned UID space's cycle is dropped with it")
	require.Nil(t, cp.HighestModSeq)
	reps := b.forwardUntilDone(t, sess, nil)
	require.Equal(t, "completed", reps[len(reps)-1].Cycle)
	require.Equal(t, began, *b.checkpoint(t).HighestModSeq)

	b.user.SetFlags(folder, 3, []imap.Flag{imap.FlagFlagged}, nil)
	require.True(t, b.pass(t, sess, 500).Narrowed)
	require.Equal(t, `\Flagged`, b.local(t, 3))

	// Recreated after it.
	recreated = time.Now()
	validity = b.user.RecreateFolder(folder)
	b.seed(t, 2000, 600)
	began = b.user.HighestModSeq(folder)
	again := b.open(t)
	rep = b.forward(t, again)
	require.True(t, rep.ProgressReset)
	cp = b.checkpoint(t)
	require.Equal(t, validity, cp.UIDValidity)
	require.Nil(t, cp.HighestModSeq, "the sequence of the abandoned UID space is dropped with it")
	require.Equal(t, began, cp.Cycle.ModSeq)
	require.True(t, cp.Cycle.StartedAt.After(recreated))
	b.forwardUntilDone(t, again, nil)
	require.Equal(t, began, *b.checkpoint(t).HighestModSeq)
	require.True(t, b.pass(t, again, 500).Narrowed)
}

// TestFirstSynchronizationForgetsItsCycleWhenTheServerLosesCondStore: a
// server that stops advertising CONDSTORE part-way through a first
// synchronization ends the cycle the synchronization began, and the rest
// is synchronized and reconciled as without sequences; once the server
// reports sequences again a window begins a cycle, as for any folder
// without one.
func TestFirstSynchronizationForgetsItsCycleWhenTheServerLosesCondStore(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t)
	b := setup(t, srv, 700)
	rep := b.forward(t, b.open(t))
	require.True(t, rep.More)
	require.Equal(t, "started", rep.Cycle)

	srv.RestartWith(dovecot.WithCapability("IMAP4rev1 LITERAL+ SASL-IR AUTH=PLAIN"))
	sess := b.open(t)
	rep = b.forward(t, sess)
	require.False(t, rep.More)
	require.Equal(t, "forgotten", rep.Cycle)
	cp := b.checkpoint(t)
	require.Nil(t, cp.Cycle)
	require.Nil(t, cp.HighestModSeq)
	back := b.pass(t, sess, 500)
	require.False(t, back.Narrowed)
	require.Equal(t, "FLAGS", back.Mode)
	require.Empty(t, back.Cycle)

	srv.RestartWith(dovecot.WithCapability(""))
	back = b.pass(t, b.open(t), 500)
	require.False(t, back.Narrowed)
	require.Equal(t, "started", back.Cycle)
	require.True(t, strings.Contains(b.pass(t, b.open(t), 500).Cycle, "completed"), "700 messages take two windows of 500")
}
