package jobs

import (
	"github.com/riverqueue/river"
)

// Watch keeps one push account's folders watched: one subscription for
// the account where the server offers NOTIFY and IDLE, one session per
// folder where it offers IDLE alone. A report makes that folder's pass run
// now. A watch holds its worker for its whole life, which is bounded: it
// re-arms itself by snoozing, so it comes back as the same row, on
// whichever process fetches it next.
type Watch struct {
	// AccountID is the configured account identifier.
	AccountID string `json:"account_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (Watch) Kind() string { return "watch" }

// WatchMaxAttempts is high on purpose: a watch whose attempt failed is
// tried again for as long as the account asks for push.
const WatchMaxAttempts = 100_000

// InsertOpts implements river.JobArgsWithInsertOpts: at most one watch per
// account is pending or running at any moment, across every process
// sharing the database, so exactly one process holds each account's
// connections.
func (Watch) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       QueueWatches,
		MaxAttempts: WatchMaxAttempts,
		UniqueOpts:  uniqueWhileOutstanding(),
	}
}
