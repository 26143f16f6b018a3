package jobs

// The queues MailFathom's jobs run on. Each gets its own worker count so a
// slow kind of work (a large backfill) never holds the slots another kind
// needs.
const (
	// QueueAccounts runs account runs: list folders, resolve aliases,
	// schedule folder passes.
	QueueAccounts = "accounts"
	// QueueFolders runs folder synchronization passes and reconciliation
	// windows.
	QueueFolders = "folders"
	// QueueBackfill runs extraction backfill batches.
	QueueBackfill = "backfill"
	// QueueMutations runs mailbox mutation stages.
	QueueMutations = "mutations"
	// QueueWatches runs the watches of push accounts, each holding its
	// worker for its whole (bounded) life.
	QueueWatches = "watches"
	// QueueEmbeddings runs embed jobs and the embedding backfill; it is
	// worked only with an embedding profile configured.
	QueueEmbeddings = "embeddings"
	// QueueVectorIndex runs the vector index's steps, one at a time; it is
	// worked only with an embedding profile configured.
	QueueVectorIndex = "vector_index"
)

// Queues lists every queue name, in a fixed order.
var Queues = []string{QueueAccounts, QueueFolders, QueueBackfill, QueueMutations, QueueWatches, QueueEmbeddings, QueueVectorIndex}
