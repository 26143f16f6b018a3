package wire

// Change says which folder an unsolicited response reports a change in,
// and whether it reports one at all:
//
//   - a STATUS response (RFC 3501 §7.2.4), which a NOTIFY subscription
//     sends for a folder that is not open (RFC 5465 §5.2–§5.3), names it;
//   - EXISTS, EXPUNGE and FETCH (RFC 3501 §7.3.1, §7.4.1, §7.4.2) and
//     VANISHED (RFC 7162 §3.2.10) are about the folder the connection has
//     open.
//
// Nothing else is carried out of a report: not a count, not a UID, not a
// flag. The pass that follows re-reads the folder the way every other pass
// does, so a server that sends a wrong number changes nothing. RECENT is
// not a change of its own (EXISTS accompanies every new message), and a
// response about the open folder while none is open reports nothing.
func (c *Conn) Change(r *Response) (folder string, ok bool) {
	switch r.Kind {
	case RespMailboxStatus:
		return r.Mailbox, r.Mailbox != ""
	case RespExists, RespExpunge, RespFetch, RespVanished:
		return c.folder, c.folder != ""
	}
	return "", false
}
