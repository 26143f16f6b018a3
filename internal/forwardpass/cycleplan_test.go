package forwardpass

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// planCycle is the forward pass's share of the reconciliation cycle's
// rules, for each checkpoint and EXAMINE a pass can meet. A folder
// reporting NOMODSEQ has no HIGHESTMODSEQ, which no Dovecot this harness
// starts reports, so the table covers it; the backward pass's tests meet
// the other cases against Dovecot.
func TestPlanCycle(t *testing.T) {
	t.Parallel()
	examined := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	modseq := func(m uint64) *uint64 { return &m }
	cycle := func(m uint64) *mailstore.ReconcileCycle {
		return &mailstore.ReconcileCycle{ModSeq: m, StartedAt: examined.Add(-time.Hour)}
	}
	checkpoint := func(validity, last uint32, seq *uint64, c *mailstore.ReconcileCycle) *mailstore.Checkpoint {
		return &mailstore.Checkpoint{FolderID: 1, UIDValidity: validity, LastSeenUID: last, HighestModSeq: seq, Cycle: c}
	}
	starts := func(m uint64) *mailstore.ReconcileCycle {
		return &mailstore.ReconcileCycle{ModSeq: m, StartedAt: examined}
	}

	for name, tc := range map[string]struct {
		expected *mailstore.Checkpoint
		modseq   uint64
		after    uint32
		want     cyclePlan
	}{
		"FirstSynchronization":             {nil, 100, 0, cyclePlan{start: starts(100), complete: true}},
		"FirstSynchronizationNoModSeq":     {nil, 0, 0, cyclePlan{}},
		"FirstSynchronizationOutOfRange":   {nil, math.MaxInt64 + 1, 0, cyclePlan{}},
		"RecreatedFolder":                  {checkpoint(6, 900, modseq(80), cycle(70)), 5, 0, cyclePlan{start: starts(5), complete: true}},
		"ResumedFirstSynchronization":      {checkpoint(7, 500, nil, cycle(100)), 120, 500, cyclePlan{complete: true}},
		"ResumedWithoutSequences":          {checkpoint(7, 500, nil, cycle(100)), 0, 500, cyclePlan{forget: true}},
		"ResumedWithTheSequenceBackwards":  {checkpoint(7, 500, nil, cycle(100)), 90, 500, cyclePlan{forget: true}},
		"WalkedFromTheStartAgainBackwards": {checkpoint(7, 0, nil, cycle(100)), 90, 0, cyclePlan{forget: true, start: starts(90), complete: true}},
		"EmptyFolderWithASequence":         {checkpoint(7, 0, modseq(50), nil), 60, 0, cyclePlan{}},
		"LaterPass":                        {checkpoint(7, 500, modseq(50), nil), 60, 500, cyclePlan{}},
		"LaterPassInABackwardCycle":        {checkpoint(7, 500, nil, cycle(40)), 60, 500, cyclePlan{complete: true}},
		"LaterPassWithoutSequences":        {checkpoint(7, 500, modseq(50), nil), 0, 500, cyclePlan{}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := planCycle(tc.expected, 7, tc.modseq, tc.after, examined)
			require.Equal(t, tc.want, got)
		})
	}
}
