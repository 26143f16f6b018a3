// Package wire is MailFathom's own IMAP command and response layer, which
// the IMAP adapter (package imapx) uses where go-imap v2 falls short:
// go-imap's client refuses ENABLE QRESYNC, cannot parse the VANISHED
// responses that follow it, and has no way to send a command it does not
// know. It also holds the transport both layers share: the socket every
// connection runs over and the watchdog that bounds a command.
//
// # Connections
//
// A Conn takes over an IMAP connection that is already established and
// authenticated (imapx does that with go-imap, then hands the stream over)
// and drives it with one method per command, each in its own file:
//
//	c := wire.New(sock, stream, caps, maxUntagged)
//	enabled, err := c.Enable(ctx, timeout, "QRESYNC")   // RFC 5161
//	st, err := c.Examine(ctx, timeout, path, condstore) // RFC 3501 §6.3.2, never SELECT
//	err = c.UIDFetchFlags(ctx, timeout, q, handle)      // UID FETCH of FLAGS, UID, MODSEQ
//	err = c.UIDSearch(ctx, timeout, set, handle)        // UID SEARCH UID <set>
//	st, changed, err := c.NotifySet(ctx, timeout, others, true)  // NOTIFY SET STATUS, RFC 5465 §3.1
//	changed, err := c.Idle(ctx, timeout, renewal)       // IDLE … DONE, RFC 2177 §3
//	err = c.Compress(ctx, timeout)                      // COMPRESS DEFLATE, RFC 4978
//	stream := c.Detach()                                // hand the (inflated) stream on
//	err = c.Close(timeout)                              // LOGOUT, RFC 3501 §6.1.3
//
// Every command runs through one command runner, which tags it, writes it,
// and reads its responses up to the tagged completion (RFC 3501 §2.2),
// handing each untagged Response to the command's Handler. A Conn sends
// nothing outside its list of commands, and none of them changes a mailbox
// or sets \Seen: UIDFetchFlags refuses any data item but FLAGS, UID and
// MODSEQ before anything is sent; NOTIFY asks for no message data and
// IDLE returns only which folders a server's unsolicited reports named
// (Change), never a number from them. UID sets go out compressed and chunked
// (ChunkUIDs) and come back as ranges (UIDRanges), never expanded.
//
// # Responses
//
// The decoder reads the grammar of RFC 3501 §7 and §9 for the responses
// these commands produce, with ENABLED (RFC 5161), ESEARCH (RFC 4731),
// the CONDSTORE and QRESYNC additions (RFC 7162) and VANISHED. It is
// bounded: every size, count and nesting depth is checked before anything
// is allocated for it, a literal is consumed by its declared length so a
// server cannot desynchronize it, and input it cannot parse ends the
// connection with ErrMalformedResponse inside a *TransportError, never a
// panic. A Response never holds a server's status text.
//
// # Failures
//
// A NO or BAD is a *CommandError and leaves the connection usable.
// Anything that ends the conversation (a write or read failure, a
// malformed response, a BYE, the command's timeout) kills the Socket and
// is a *TransportError; the caller's own context ending is returned as its
// error, wrapped, so that errors.Is(err, context.Canceled) holds. The
// sentinel errors are imapx's, which exports them as the same values; the
// two error types stay below the adapter, which turns them into its own
// types of the same name and fields.
//
// # What it does not do
//
// Conn does not dial, negotiate TLS or authenticate, does not reconnect,
// and keeps no state beyond the open folder, the enabled extensions and
// whether compression is on.
// It does not answer a continuation request: no command it sends has a
// literal or a SASL exchange, so one is a malformed response.
package wire
