package jobs

import "github.com/riverqueue/river"

// ExtractionBackfill is one batch of the extraction backfill: it reads the
// raw MIME of messages stored before extraction existed (content but no
// search document), writes their markers and text, and commits them with
// the position it reached and the next batch's job — or none, which ends
// the backfill, when nothing is left. It reaches no mail server.
type ExtractionBackfill struct {
	// BatchInRun counts the batches of the current run; the run yields for
	// MailExtractionBackfill's Interval after MaxBatchesPerRun of them.
	BatchInRun int `json:"batch_in_run"`
}

// Kind implements river.JobArgs.
func (ExtractionBackfill) Kind() string { return "extraction_backfill" }

// InsertOpts implements river.JobArgsWithInsertOpts. Not River-unique: each
// batch inserts its successor while it runs; the scheduler keeps one
// pending at a time.
func (ExtractionBackfill) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBackfill, MaxAttempts: 1000}
}
