package jobs

import (
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// uniqueWhileOutstanding is the uniqueness of a job kind of which at most
// one per set of unique arguments may be waiting or running at any moment,
// across every process sharing the database: an insert while one is
// available, pending, retryable, running or scheduled is a duplicate. A
// completed, cancelled or discarded job does not count, so the next one
// may be inserted once it has ended.
func uniqueWhileOutstanding() river.UniqueOpts {
	return river.UniqueOpts{
		ByArgs: true,
		ByState: []rivertype.JobState{
			rivertype.JobStateAvailable,
			rivertype.JobStatePending,
			rivertype.JobStateRetryable,
			rivertype.JobStateRunning,
			rivertype.JobStateScheduled,
		},
	}
}
