package jobs

import "github.com/riverqueue/river"

// OrphanSweep looks for account runs and folder passes whose process
// stopped while working them and hands them back to River. The elected
// leader inserts one periodically.
type OrphanSweep struct{}

// Kind implements river.JobArgs.
func (OrphanSweep) Kind() string { return "orphan_sweep" }

// InsertOpts implements river.JobArgsWithInsertOpts. A failed sweep is
// simply replaced by the next one; sweeps are not unique (River's unique
// states include completed, which would skip every sweep after the first
// for as long as the completed row is retained), and two overlapping
// sweeps are harmless: each skips the rows the other locked.
func (OrphanSweep) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueAccounts, MaxAttempts: 1}
}
