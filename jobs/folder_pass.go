package jobs

import (
	"github.com/riverqueue/river"
)

// FolderPass is the forward synchronization pass over one alias binding of
// one account: new mail since the checkpoint, bounded batches. A pass that
// leaves work behind snoozes itself to continue, so a large folder advances
// without waiting out the interval and without holding a worker for hours.
// The account run that schedules a pass usually carries it over the
// session it listed the folders with: the pass waits pending, its carrier
// named in its metadata, until the run completes it or hands it back.
type FolderPass struct {
	// AccountID is the configured account identifier.
	AccountID string `json:"account_id" river:"unique"`
	// Alias is the folder alias (normalized: trimmed, upper-cased). The
	// pass works on the alias's latest binding.
	Alias string `json:"alias" river:"unique"`
}

// Kind implements river.JobArgs.
func (FolderPass) Kind() string { return "folder_pass" }

// FolderPassMaxAttempts bounds the retries of one pass; a discarded pass is
// scheduled afresh by the account's next run.
const FolderPassMaxAttempts = 10

// InsertOpts implements river.JobArgsWithInsertOpts: at most one pass per
// (account, alias) is pending or running at any moment, across every
// process sharing the database.
func (FolderPass) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       QueueFolders,
		MaxAttempts: FolderPassMaxAttempts,
		UniqueOpts:  uniqueWhileOutstanding(),
	}
}
