package jobs

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// EmbedEmail embeds the passages of up to MAILFATHOM_EMBEDDING_BATCH_SIZE
// stored messages under the active embedding profile: the passages that
// have no vector under it yet, of the messages still served. A folder pass
// inserts these in the commit that stores the messages (the offer), and
// the embedding backfill inserts them for messages an offer missed. It
// carries stored-email ids only.
type EmbedEmail struct {
	// EmailIDs are the stored emails whose passages to embed.
	EmailIDs []uuid.UUID `json:"email_ids"`
}

// Kind implements river.JobArgs.
func (EmbedEmail) Kind() string { return "embed_email" }

// InsertOpts implements river.JobArgsWithInsertOpts. Not unique: embedding
// a passage twice stores one vector, and a repeated offer is cheaper than
// a uniqueness check on every write group. River's backoff between its
// attempts grows to hours; a job that spends them all is offered again by
// the embedding backfill its failures scheduled.
func (EmbedEmail) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEmbeddings, MaxAttempts: 15}
}
