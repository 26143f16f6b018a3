package jobs

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// EmbeddingBackfill is one step of the embedding backfill's walk over the
// stored messages in id order: it offers, as far as the backlog has room,
// the served messages past After whose passages have no vector under the
// active profile, and commits the offer with its successor. A walk that
// reaches the end having offered something starts over after
// MAILFATHOM_BACKFILL_INTERVAL (an offered message may yet fail); a walk
// that offered nothing ends the chain. It carries a stored-email id only.
type EmbeddingBackfill struct {
	// Profile is the embedding profile the walk offers for; a step of
	// another profile's walk starts a new one.
	Profile int16 `json:"profile"`
	// After is the last stored email the walk has passed; uuid.Nil starts
	// a walk.
	After uuid.UUID `json:"after"`
	// Offered reports that this walk has offered something.
	Offered bool `json:"offered"`
}

// Kind implements river.JobArgs.
func (EmbeddingBackfill) Kind() string { return "embedding_backfill" }

// InsertOpts implements river.JobArgsWithInsertOpts. Not River-unique:
// each step inserts its successor while it runs; the scheduler keeps one
// pending at a time.
func (EmbeddingBackfill) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEmbeddings, MaxAttempts: 1000}
}
