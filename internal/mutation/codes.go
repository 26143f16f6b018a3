package mutation

// The five-digit failure codes a mailbox_mutations row records: the
// reason an unfinished mutation is stuck, or why it was given up on. The
// first digit groups them: 1 an outcome nobody knows, 2 a refusal every
// later attempt would get too, 3 a bound spent, 4 a refusal of the
// server's that a later attempt may not get, 5 an unreachable mailbox.
// They are stable: operators query them.
const (
	// CodeUnknownOutcome: a placement was sent and its answer never read.
	// It is never issued again.
	CodeUnknownOutcome = "10001"
	// CodeNoSafeWay: the server offers no safe way to make the change
	// (neither MOVE nor UIDPLUS for a relocation, no UIDPLUS for a
	// delete). Stops at the first refusal.
	CodeNoSafeWay = "20001"
	// CodeDestinationMissing: the destination folder does not exist.
	// Stops at the first refusal.
	CodeDestinationMissing = "20002"
	// CodeSourceGone: the source folder was recreated (another
	// UIDVALIDITY) or its binding is gone, so the occurrence the change
	// names no longer exists.
	CodeSourceGone = "20003"
	// CodeAttemptsExhausted: MaxMutationAttempts are spent.
	CodeAttemptsExhausted = "30001"
	// CodeCommandRefused: the server answered NO or BAD.
	CodeCommandRefused = "40001"
	// CodeFlagCleared: the expunge of a delete or a relocation left the
	// message in place, because its \Deleted flag had been cleared since
	// it was set; the next attempt sets it again.
	CodeFlagCleared = "40002"
	// CodeMailboxUnavailable: the mailbox could not be reached.
	CodeMailboxUnavailable = "50001"
)
