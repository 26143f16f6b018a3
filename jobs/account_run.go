package jobs

import "github.com/riverqueue/river"

// AccountRun is one run for one account: list its folders once, resolve
// every configured alias to a binding, and schedule a folder pass per
// binding. The run that completes inserts the next one, Interval later; a
// run that failed is retried on the run-backoff schedule.
type AccountRun struct {
	// AccountID is the configured account identifier.
	AccountID string `json:"account_id"`
	// FailuresBefore counts the consecutive failed runs that preceded the
	// job this one succeeds, so the backoff keeps growing across a run that
	// was cancelled and rescheduled. Zero after a success.
	FailuresBefore int `json:"failures_before,omitempty"`
}

// Kind implements river.JobArgs.
func (AccountRun) Kind() string { return "account_run" }

// AccountRunMaxAttempts is high on purpose: a failing account is retried on
// the backoff schedule for as long as it stays configured, never discarded.
const AccountRunMaxAttempts = 100_000

// InsertOpts implements river.JobArgsWithInsertOpts. Account runs are not
// River-unique: a run schedules its successor while it is still running,
// which River's uniqueness (it always covers running jobs) would refuse.
// Their one-per-account invariant is kept by the scheduler instead.
func (AccountRun) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueAccounts, MaxAttempts: AccountRunMaxAttempts}
}
