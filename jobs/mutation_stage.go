package jobs

import (
	"github.com/riverqueue/river"
)

// MutationStage carries one stage of a mailbox mutation: the first is
// inserted with the mutation's record, each later one with the advance of
// the stage before it, in the same transaction. A job whose Stage is no
// longer the record's does nothing: whoever advanced the record inserted
// the job of the stage it reached.
type MutationStage struct {
	// AccountID is the configured account identifier.
	AccountID string `json:"account_id"`
	// MutationID is the mailbox_mutations row.
	MutationID string `json:"mutation_id" river:"unique"`
	// Stage is the record's stage this job carries on from.
	Stage string `json:"stage" river:"unique"`
}

// Kind implements river.JobArgs.
func (MutationStage) Kind() string { return "mutation_stage" }

// InsertOpts implements river.JobArgsWithInsertOpts: at most one job per
// (mutation, stage) is pending or running, and a failed stage is not
// retried on a schedule of its own: it waits for the account's next run,
// which converges every unfinished mutation of the account.
func (MutationStage) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       QueueMutations,
		MaxAttempts: 1,
		UniqueOpts:  uniqueWhileOutstanding(),
	}
}
