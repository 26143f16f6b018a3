// Package mutation carries MailFathom's changes to a mailbox — relocate,
// copy, delete, mark read, mark unread one stored email — from their
// durable record (mailbox_mutations) to the server, over the account's one
// write connection.
//
// A change is recorded before any command goes out (Request), and each
// stage is advanced in the same transaction that inserts the job of the
// next stage, so a process that stops anywhere leaves a record that says
// where to continue:
//
//	Recorded        → issue the change from the beginning
//	Copied          → remove the source; the copy is never repeated
//	Flagged         → UID EXPUNGE alone
//	PlacementIssued → never reissued: a MOVE completes once synchronization
//	                  sees the source leave; a COPY (or the COPY of a
//	                  relocation without MOVE) waits UnknownMutationOutcomeGrace
//	                  for the placement to be observed, then is dead-lettered
//	Completed, DeadLettered → nothing
//
// Which sequence a relocation took (MOVE, or COPY + STORE \Deleted + UID
// EXPUNGE) is recorded when the placement is issued, and resumption
// follows the record rather than what the server advertises on the next
// connection.
//
// A placement the server carried without naming it (no COPYUID) is joined
// to no discovery: it reads "completed, unjoined" (View.Summary), the
// destination's copy is stored as a discovery of its own, and a
// relocation's source is tombstoned once synchronization sees it leave.
//
// Attempts are counted before each attempt (so one that kills the process
// counts), bounded by MaxMutationAttempts; a server with no safe way to
// carry the change and a missing destination folder are final at the first
// refusal. A failure that may pass is recorded with its code and left for
// the account's next run, which converges every unfinished mutation of the
// account: nothing here retries on a schedule of its own.
//
// One worker at a time carries a mutation (an advisory lock), and each
// account has at most one write connection across every process
// (Connections). The connection is the mailbox layer's
// mailsession.WriteSession: commands run under the account's
// MailboxDataRetrieval pipeline and the connection under
// MailboxSessionEstablishment, and one the server closed is replaced
// before a change is given to it. A MOVE or COPY whose bytes were written
// and whose answer was never read is not repeated by the pipeline or by
// anything else; one that failed before a byte of it was written is an
// ordinary failure, and is issued again.
//
// Nothing here logs or records mail: ids, UIDs, aliases, the mutation's
// name and a failure code only.
package mutation
