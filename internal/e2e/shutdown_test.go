package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/service"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestSIGTERMDrainsPassThenResumes sends SIGTERM to `mailfathom serve` in
// the middle of a folder pass of a first sync and checks what the drain
// promises: the pass under way commits the batch in flight with its
// checkpoint and opens no other, nothing is cancelled, the process exits 0 within its
// shutdown bound with its shutdown steps logged in order, and what it
// leaves is exactly a prefix of the folder up to the checkpoint. A restart
// then finishes the sync with every message stored once.
func TestSIGTERMDrainsPassThenResumes(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.URL(t))
	user := b.server.NewUser()
	// 2 000 messages of the realistic mix at a quarter of its size
	// (≈ 35 MB) in passes of 1 000: the stop lands in the first pass, and
	// the second is left for the restart.
	const n = 2000
	c := seedCorpus(t, user, "INBOX", n, 17, 4)
	t.Logf("corpus: %s", c)
	b.addAccount(t, "drain", user)
	// A drain long enough for a batch even on a busy machine.
	const drain = 20 * time.Second
	b.env["MAILFATHOM_SYNC_SHUTDOWN_DRAIN_TIMEOUT"] = drain.String()
	b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "100"
	b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCHES_PER_RUN"] = "10"
	b.env["MAILFATHOM_LOG_LEVEL"] = "debug" // for "folder pass batch committed"
	bound := service.ShutdownBound(drain)

	p := b.start(t, "serve-1")
	p.waitLog(t, "folder pass batch committed", 2*time.Minute)
	_, atSignal := b.checkpoint(t, "INBOX")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	signalled := time.Now()
	select {
	case <-p.exited:
	case <-time.After(bound + 30*time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("serve did not exit within %v of SIGTERM", bound+30*time.Second)
	}
	exit := time.Since(signalled)
	t.Logf("SIGTERM with the checkpoint at %d; exited after %v (drain %v, bound %v)",
		atSignal, exit.Round(time.Millisecond), drain, bound)
	require.NoError(t, p.err, "serve exits 0 after SIGTERM:\n%s", tailLines(p.rawLog(), 30))
	require.Less(t, exit, bound, "serve exits within drain + hard stop + HTTP shutdown")

	// The log: the stop, the pass ending after the batch in flight (at most
	// one batch committed after the stop), River stopped without
	// cancelling anything, the process stopped cleanly.
	lines := p.logLines()
	at := func(from int, msg string, attrs ...string) int {
		t.Helper()
		for i := from; i < len(lines); i++ {
			if lines[i].msg() != msg {
				continue
			}
			match := true
			for j := 0; j+1 < len(attrs); j += 2 {
				if fmt.Sprint(lines[i][attrs[j]]) != attrs[j+1] {
					match = false
				}
			}
			if match {
				return i
			}
		}
		t.Fatalf("no %q %v after line %d of the log:\n%s", msg, attrs, from, tailLines(p.rawLog(), 40))
		return -1
	}
	stopping := at(0, "shutting down")
	logged, ok := lines[stopping].duration("bound")
	require.True(t, ok)
	require.Equal(t, bound, logged, "the log names the shutdown bound")
	i := at(stopping, "stopping River: no new jobs are fetched; running jobs get the drain period")
	i = at(i, "folder pass finished", "more", "true")
	committedAfterStop := 0
	for _, l := range lines[stopping:i] {
		if l.msg() == "folder pass batch committed" {
			committedAfterStop++
		}
	}
	require.LessOrEqual(t, committedAfterStop, 1, "the batch in flight, and no other")
	i = at(i, "River stopped", "clean", "true")
	riverStopped := lines[i]
	at(i, "shutdown complete", "clean", "true")
	took, ok := riverStopped.duration("took")
	require.True(t, ok)
	require.Less(t, took, drain, "the pass ended inside the drain")
	t.Logf("River stopped %v into the drain", took.Round(time.Millisecond))
	require.Zero(t, p.count("folder pass ended early"), "nothing was cancelled")

	// The database: the batch in flight at the signal and those after it are
	// committed with their checkpoint, and nothing beyond it: the rows are
	// the folder's first UIDs, without a gap, up to the checkpoint.
	validity, last := b.checkpoint(t, "INBOX")
	require.Equal(t, int64(user.UIDValidity("INBOX")), validity)
	require.GreaterOrEqual(t, last, atSignal)
	rows := b.stored(t, "drain", "INBOX")
	require.NotEmpty(t, rows)
	require.Less(t, len(rows), n, "the sync finished before the signal took effect: the corpus is too small")
	for i, r := range rows {
		require.Equal(t, int64(c.uids[i]), r.uid, "row %d: the stored rows are the folder's first UIDs, each once", i)
		require.Equal(t, c.sums[i][:], r.sha, "uid %d", r.uid)
	}
	require.Equal(t, last, rows[len(rows)-1].uid, "the checkpoint is the last stored UID")
	t.Logf("after the stop: %d of %d stored, checkpoint %d", len(rows), n, last)

	// A restart continues from the checkpoint and finishes the folder.
	restarted := time.Now()
	p2 := b.start(t, "serve-2")
	b.waitSynced(t, p2, n, 3*time.Minute)
	t.Logf("the restart finished the sync in %v", time.Since(restarted).Round(time.Millisecond))
	p2.stop(t)
	b.requireStored(t, "drain", "INBOX", user, c)
	_, last = b.checkpoint(t, "INBOX")
	require.Equal(t, int64(c.uids[len(c.uids)-1]), last, "the checkpoint is the last UID")
}
