package jobs

import (
	"github.com/riverqueue/river"
)

// ReconcileWindow is one backward pass over an alias binding: a bounded
// window of stored mail is asked about on the server (flags and existence
// only) and the answer applied. The forward pass inserts one in the same
// transaction as its final checkpoint write, so every pass is followed by a
// window, and carries it itself over its own session: the window waits
// pending, its carrier named in its metadata, until the pass completes it
// or hands it back to River.
type ReconcileWindow struct {
	// AccountID is the configured account identifier.
	AccountID string `json:"account_id" river:"unique"`
	// Alias is the folder alias; the window works on its latest binding.
	Alias string `json:"alias" river:"unique"`
}

// Kind implements river.JobArgs.
func (ReconcileWindow) Kind() string { return "reconcile_window" }

// InsertOpts implements river.JobArgsWithInsertOpts: at most one window per
// (account, alias) is pending or running.
func (ReconcileWindow) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       QueueFolders,
		MaxAttempts: 10,
		UniqueOpts:  uniqueWhileOutstanding(),
	}
}
