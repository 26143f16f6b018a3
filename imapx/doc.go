// Package imapx is MailFathom's IMAP adapter over go-imap v2.
//
// Its read-side types expose no operation that can change a mailbox:
// folders are opened with EXAMINE and content is fetched with BODY.PEEK, so
// nothing that holds a ReadSession can set \Seen or move, copy or delete a
// message. The one type that can change a mailbox, WriteConnection, is a
// separate type that no read-side type holds, returns or converts to, so
// that guarantee is checked by the compiler (see Write connection).
//
// # Read sessions
//
// OpenReadSession connects, protects the connection as Endpoint.Security
// says (implicit TLS, STARTTLS required or when available, or none) and
// authenticates — with the password Endpoint.Password resolves or, for a
// token account, with the bearer token Endpoint.Token obtains (OAUTHBEARER,
// RFC 7628, preferred over XOAUTH2); the returned ReadSession lists
// folders, examines one, and searches and fetches in it:
//
//	s, err := imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{Logger: log})
//	folders, err := s.ListFolders(ctx)
//	state, err := s.Examine(ctx, path)                 // EXAMINE, never SELECT
//	uids, err := s.SearchUIDs(ctx, lastSeen, earliest) // UID SEARCH UID n:* [SINCE d]
//	md, err := s.FetchMetadata(ctx, uids[:batch])      // UID FETCH (UID FLAGS INTERNALDATE RFC822.SIZE ENVELOPE)
//	err = s.FetchBodies(ctx, uids[:batch], maxRaw, store) // UID FETCH (UID BODY.PEEK[]), one message at a time
//	defer s.Close()
//
// FetchBodiesThenMetadata sends a batch's body FETCH and the following
// batch's metadata FETCH together (pipelined, RFC 9051, 5.5), so a long
// link carries no silent round trip between one batch's content and the
// next batch's list.
//
// A ReadSession is driven by one goroutine. Every command is bounded by
// SessionOptions.CommandTimeout and by the caller's context: either one
// closes the connection when it runs out.
//
// With Endpoint.Compression, and a server that advertises
// COMPRESS=DEFLATE, the session's connection is compressed once it is
// authenticated (RFC 4978; compress.go explains how go-imap is kept
// unaware of it). Nothing else changes: the same commands, bounds and
// failures.
//
// # Watching
//
// OpenWatchSession establishes a connection the same way and returns a
// WatchSession, which can only watch: Subscribe opens the first folder with
// EXAMINE and names the rest in NOTIFY SET (RFC 5465), WatchFolder opens
// one folder for IDLE alone, and Wait runs one IDLE (RFC 2177) for at most
// a renewal and returns which watched folders the server reported a change
// in — never a count, a UID or a flag from the report. It has no operation
// that fetches anything, so a change it hears about is read by an ordinary
// ReadSession afterwards.
//
// # Reconciliation
//
// Reconcile asks the server about a window of stored UIDs of the examined
// folder and returns which still exist, their flags and which left:
//
//	mode := s.ReconcileMode()                            // Plain, CondStore or QResync, as advertised
//	ans, err := s.Reconcile(ctx, window, recordedModSeq) // Present, Changed, Vanished, HighestModSeq
//	still, err := s.ExistingUIDs(ctx, ans.Vanished)      // UID SEARCH only: confirm before acting
//
// The question follows what the server advertises (RFC 7162): UID FETCH
// (FLAGS UID) where neither CONDSTORE nor QRESYNC is offered, UID SEARCH
// then UID FETCH ... (CHANGEDSINCE n) with CONDSTORE only, and one UID FETCH
// ... (CHANGEDSINCE n VANISHED) with both. ReconcileItems is the only
// message data it asks for.
//
// ReconcileChanges asks the whole folder instead, once a caller holds a
// sequence that covers everything it stored:
//
//	ch, err := s.ReconcileChanges(ctx, recordedModSeq) // Changed, Vanished or Existing, HighestModSeq
//
// one UID FETCH 1:* ... (CHANGEDSINCE n VANISHED) with QRESYNC, that fetch
// without VANISHED and an identifier-only UID SEARCH UID 1:* with CONDSTORE
// alone, and nothing (Narrowed false) where the folder has no usable
// sequence.
//
// Both are driven by the adapter's own command and response layer, package
// imapx/internal/wire, one file per command: go-imap's client refuses
// ENABLE QRESYNC, cannot parse the VANISHED responses that follow it, and
// has no way to send a command it does not know. On a read session they go
// over the session's own connection, which go-imap lends to the wire layer
// between two of its commands (lend.go), so a folder pass and the
// reconciliation window after it share one login; QRESYNC stays off that
// connection, which keeps every go-imap command there safe from a VANISHED
// it would die on, so a read session asks in CondStore mode at most. For
// the questions it sends only EXAMINE, UID FETCH of FLAGS, UID and MODSEQ
// and UID SEARCH.
//
// Work that only reconciles, with no read session at hand, opens its
// session with OpenReconcileSession instead: its one connection is the
// wire layer's from the start, with QRESYNC enabled where the server
// offers it, and Examine opens the folder there.
//
// # Server identities
//
// A server that offers X-GM-EXT-1 (Gmail) or OBJECTID (RFC 8474) names a
// message the same in every folder that shows it (IdentityScheme).
// FetchIdentities asks for those names — X-GM-MSGID, X-GM-THRID and
// X-GM-LABELS, or EMAILID and THREADID — over the session's own
// connection: go-imap cannot parse them, so it lends its stream to the
// wire layer between two of its commands (lend.go), and a pass that asks
// costs the server no second login. On Gmail Reconcile and
// ReconcileChanges ask X-GM-LABELS with the flags.
//
// # Write connection
//
// OpenWriteConnection opens the one connection of an account that changes
// the mailbox, with the same dial, TLS policy and authentication. It
// selects a folder read-write and issues one command per call, each for
// one UID:
//
//	w, err := imapx.OpenWriteConnection(ctx, ep, opts)
//	uv, err := w.Select(ctx, path)              // SELECT, read-write
//	p, err := w.Move(ctx, uid, dest)            // UID MOVE (RFC 6851), only where MOVE is advertised
//	p, err := w.Copy(ctx, uid, dest)            // UID COPY; p is the COPYUID placement (RFC 4315)
//	err = w.StoreFlag(ctx, uid, `\Deleted`, true) // UID STORE +FLAGS.SILENT
//	err = w.ExpungeUID(ctx, uid)                // UID EXPUNGE (RFC 4315), only where UIDPLUS is advertised
//	err = w.Noop(ctx)                           // NOOP: does the server still answer? Changes nothing
//
// It never sends a plain EXPUNGE, which would also remove what the owner
// flagged \Deleted, and never uses go-imap's Move fallback. A relocation or
// delete the server offers no safe way to carry is ErrNoSafeWay, before
// anything is sent; a missing destination is ErrDestinationMissing; a MOVE
// or COPY whose bytes were written and whose answer was never read is a
// *PlacementUnknownError, which IsTransient reports false so that no retry
// layer issues it again. The bytes every command writes are counted, so a
// command that failed before any of them left is an *UnsentError, safe to
// issue again. Usable reports false once go-imap's reader has seen the
// server close the connection, and Noop checks one that sat idle, so a
// connection that ended is replaced before a change is given to it.
//
// # Failures
//
// Errors are classified for the caller's retry policy:
//
//   - transient (IsTransient true): *TransportError, for a connection that
//     dropped, was reset or closed, timed out, or whose response stream could
//     not be parsed (ErrMalformedResponse on the reconciliation connection).
//     The connection is unusable afterwards; Recover replaces it and
//     re-examines the open folder, read-only.
//   - terminal: *AuthenticationError (the credential, a password or a
//     bearer token, was rejected: repeating it is how accounts get locked),
//     *AuthenticationExchangeError (the client broke the SASL exchange off:
//     a malformed challenge, a SCRAM iteration count out of range, a
//     credential the mechanism cannot carry; the same server and
//     credential produce it again),
//     *TokenError (a token account's access token could not be obtained;
//     its source has its own retry budget), *CommandError (the server
//     answered NO or BAD), *TLSError (certificate or handshake refused),
//     ErrStartTLSUnavailable, ErrLoginDisabled, ErrProtocolViolation,
//     ErrFolderListTooLarge, ErrMailboxFolderRecreated, ErrIncompleteAnswer,
//     and anything else.
//   - later (IsTransient false, RetryLater true): *ThrottledError, a
//     server that refuses work for a while — an RFC 5530 code such as
//     [UNAVAILABLE] or [LIMIT], [THROTTLED], or a provider's words for an
//     exceeded limit (throttle.go) — in the greeting, in answer to the
//     login or any command, or in a BYE that ends the session. It wraps the
//     *CommandError or *TransportError the answer is besides, carries a
//     fixed reason and the delay the server suggested, and is repeated by
//     no retry layer: the caller schedules the next attempt.
//   - neither: the caller's own context error, returned wrapped so that
//     errors.Is(err, context.Canceled) and context.DeadlineExceeded hold.
//
// No error text and no log line carries a folder path, a user name, a
// credential, a subject or a server's response text, any of which can hold
// personal data: errors name the command, the status and the response code,
// and the debug log records command names, counts and durations only.
//
// # What go-imap does not do and this package does
//
// The STARTTLS decision needs the capabilities first, which go-imap's
// NewStartTLS does not look at, so a plain connection's greeting,
// CAPABILITY and STARTTLS are handled here before go-imap takes over; bytes
// a server sends between its STARTTLS OK and the handshake are refused.
// SASL PLAIN is built in a buffer that is zeroed after use. A search answer
// is checked before it is expanded into UIDs. A message body literal that
// ends early kills the connection instead of letting go-imap read it a
// second time concurrently with its own reader. ENABLE QRESYNC, VANISHED
// and the other responses of reconciliation are the adapter's own code in
// imapx/internal/wire (see Reconciliation): a bounded decoder that reads
// literals by their length, so that a server cannot desynchronize it, and
// fails with ErrMalformedResponse, never a panic, on input it cannot parse.
// The socket, the command watchdog and the causes of a *TransportError live
// there too, so both kinds of connection fail the same way: the
// reconciliation connection's errors are turned into this package's
// *CommandError and *TransportError at the boundary, and
// ErrMalformedResponse, ErrProtocolViolation and ErrNoFolder are the same
// values in both packages.
package imapx
