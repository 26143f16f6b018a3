package jobs

import "github.com/riverqueue/river"

// OrphanSweep looks for account runs and folder passes whose process
// stopped while working them and hands them back to River. The elected
// leader inserts one periodically.
type OrphanSweep struct{}

// Kind implements river.JobArgs.
func (OrphanSweep) Kind() string { return "orphan_sweep" }

// InsertOpts implements river.JobArgsWithInsertOpts: one sweep at a time
// is enough, and a failed one is simply replaced by the next.
func (OrphanSweep) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueAccounts, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}
