package wire

import (
	"bufio"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
)

// This file is the response decoder of a Conn: the grammar of RFC 3501 §7
// and §9 for the responses its commands produce (tagged and untagged status
// responses with their response codes, CAPABILITY, FLAGS, EXISTS, RECENT,
// EXPUNGE, FETCH with UID, FLAGS and MODSEQ, SEARCH), ENABLED (RFC 5161
// §3.2), ESEARCH (RFC 4731 §3.1 and §4), HIGHESTMODSEQ, NOMODSEQ and MODSEQ
// (RFC 7162 §3.1.2, §3.1.4), VANISHED (RFC 7162 §3.2.10) and the mailbox
// a STATUS response names with the counts it describes it by (RFC 3501
// §7.2.4; unsolicited under NOTIFY, RFC 5465 §5). Any other
// untagged response is read to its end, literals included, and dropped.
//
// The decoder reads straight from the connection, byte by byte through a
// bufio.Reader, and holds no more than the values it returns. Every bound
// below is checked before anything is allocated for it; input it cannot
// parse, or that exceeds a bound, is a *malformedError (ErrMalformedResponse)
// after which the stream is abandoned: a literal is always consumed by its
// declared length, so a server cannot make message data be read as a
// response line, and nothing a server sends can make the decoder panic.

// Bounds of one response.
const (
	// maxResponseBytes bounds one response, literals included. An ESEARCH
	// ALL or SEARCH answer for the largest reconciliation window (100,000
	// UIDs), every UID listed separately, stays below 1.2 MB.
	maxResponseBytes = 4 << 20
	// maxTokenBytes bounds a tag, an atom, a flag or a number.
	maxTokenBytes = 1024
	// maxStringBytes bounds a quoted string, a status text and a response
	// code's argument.
	maxStringBytes = 64 << 10
	// maxNesting bounds parenthesized lists inside lists.
	maxNesting = 16
	// maxFlags bounds the flags of one FETCH FLAGS item.
	maxFlags = 1024
	// maxSetRanges bounds the ranges of one sequence-set or SEARCH answer.
	maxSetRanges = 1 << 18
	// maxCaps bounds a CAPABILITY or ENABLED list.
	maxCaps = 1024
)

// Kind says what a response is.
type Kind uint8

// The kinds of response the decoder tells apart.
const (
	RespOther         Kind = iota // an untagged response this package does not use, skipped
	RespTagged                    // tag OK/NO/BAD
	RespStatus                    // * OK/NO/BAD/BYE/PREAUTH
	RespContinue                  // + text
	RespCapability                // * CAPABILITY
	RespEnabled                   // * ENABLED
	RespFlags                     // * FLAGS
	RespExists                    // * n EXISTS
	RespRecent                    // * n RECENT
	RespExpunge                   // * n EXPUNGE
	RespFetch                     // * n FETCH
	RespSearch                    // * SEARCH
	RespESearch                   // * ESEARCH
	RespVanished                  // * VANISHED [(EARLIER)]
	RespMailboxStatus             // * STATUS mailbox (...), RFC 3501 §7.2.4
)

// Response is one decoded server response. Only the fields of its Kind are
// set. It never holds a status text: error messages and logs must not carry
// server text.
type Response struct {
	Kind   Kind
	Tag    string // RespTagged
	Status string // RespTagged, RespStatus: OK, NO, BAD, BYE, PREAUTH

	// The response code of a status response, upper-cased, and the values
	// of the codes this package reads.
	Code        string
	UIDValidity uint32 // [UIDVALIDITY n]
	// Throttle is what a NO, BAD or BYE says about asking again later
	// (Throttling): a fixed reason and a suggested delay, never the text.
	Throttle      Throttle
	UIDNext       uint32 // [UIDNEXT n]
	HighestModSeq uint64 // [HIGHESTMODSEQ n]

	Num  uint32   // message sequence number of EXISTS, RECENT, EXPUNGE, FETCH
	Caps []string // CAPABILITY, ENABLED, [CAPABILITY ...]

	Fetch FetchAttrs // RespFetch

	// Mailbox is the folder path a STATUS response names, decoded from
	// modified UTF-7 (RFC 3501 §5.1.3), with INBOX in upper case.
	Mailbox string
	// Items are the values of a STATUS response's MESSAGES, UIDNEXT,
	// UIDVALIDITY and HIGHESTMODSEQ items. Only NotifySet reads them,
	// for the folders it asked the server to describe; a change report
	// carries nothing but Mailbox out (see Change).
	Items StatusItems

	// SEARCH numbers, ESEARCH ALL, VANISHED known-uids; not normalized.
	Set     UIDRanges
	Earlier bool // VANISHED (EARLIER)

	// ESEARCH: the correlator tag, whether it carried one, and whether the
	// results are UIDs.
	Correlator    string
	HasCorrelator bool
	UIDResult     bool
}

// StatusItems are the values a STATUS response (RFC 3501 §7.2.4) carried
// of MESSAGES, UIDNEXT, UIDVALIDITY and HIGHESTMODSEQ (RFC 7162 §3.1.6);
// an item it did not carry is 0. Every other item is read and dropped.
type StatusItems struct {
	Messages, UIDNext, UIDValidity uint32
	HighestModSeq                  uint64
}

// FetchAttrs are the data items of a FETCH response this package reads:
// UID, FLAGS and MODSEQ. Every other item is read to its end and dropped.
type FetchAttrs struct {
	UID       uint32
	Flags     []string // never nil when HasFlags; \Recent left out
	ModSeq    uint64
	HasUID    bool
	HasFlags  bool
	HasModSeq bool
	// Identity is what the server says the message is, across its folders:
	// X-GM-MSGID and X-GM-THRID (Gmail's IMAP extensions, in decimal) or
	// EMAILID and THREADID (RFC 8474 §5.1 and §5.2).
	Identity Identity
	// Labels are the X-GM-LABELS of a Gmail message, as sent (system labels
	// such as \Inbox keep their backslash); never nil when HasLabels.
	Labels    []string
	HasLabels bool
}

// Identity is a message's server-assigned identity. Either scheme fills
// both fields or one of them; an empty field was not sent (or was NIL, as
// RFC 8474 §5.2 allows for THREADID).
type Identity struct {
	EmailID  string
	ThreadID string
}

// malformedError says which part of the grammar a response broke. It names
// the rule only, never the server's bytes.
type malformedError struct{ what string }

func (e *malformedError) Error() string { return "imapx: malformed server response: " + e.what }

func (e *malformedError) Is(target error) bool { return target == ErrMalformedResponse }

func malformed(what string) error { return &malformedError{what: what} }

// decoder reads responses from one connection.
type decoder struct {
	r      *bufio.Reader
	budget int // bytes the current response may still take
	// skipBlank lets the first response be preceded by a bare line ending:
	// the end of the last response the previous client read before it let
	// go of the stream (see New), which its reader may have left unread.
	skipBlank bool
}

func newDecoder(r io.Reader) *decoder {
	return &decoder{r: bufio.NewReaderSize(r, 32<<10)}
}

// readResponse reads one whole response.
func (d *decoder) readResponse() (*Response, error) {
	d.budget = maxResponseBytes
	if d.skipBlank {
		d.skipBlank = false
		b, err := d.peekStart()
		if err != nil {
			return nil, err
		}
		if b == '\r' || b == '\n' {
			if err := d.crlf(); err != nil {
				return nil, err
			}
		}
	}
	b, err := d.peekStart()
	if err != nil {
		return nil, err
	}
	switch b {
	case '+':
		_, _ = d.next()
		if err := d.skipText(); err != nil {
			return nil, err
		}
		return &Response{Kind: RespContinue}, nil
	case '*':
		_, _ = d.next()
		if err := d.expect(' ', "untagged response"); err != nil {
			return nil, err
		}
		return d.untagged()
	}
	tag, err := d.token(isTagChar, "tag")
	if err != nil {
		return nil, err
	}
	if err := d.expect(' ', "tagged response"); err != nil {
		return nil, err
	}
	status, err := d.atom("status")
	if err != nil {
		return nil, err
	}
	switch status {
	case "OK", "NO", "BAD":
	default:
		return nil, malformed("tagged status")
	}
	r := &Response{Kind: RespTagged, Tag: tag, Status: status}
	return r, d.respText(r)
}

func (d *decoder) untagged() (*Response, error) {
	b, err := d.peek()
	if err != nil {
		return nil, err
	}
	r := &Response{}
	if isDigit(b) {
		n, err := d.number32("message number")
		if err != nil {
			return nil, err
		}
		r.Num = n
		if err := d.expect(' ', "message data"); err != nil {
			return nil, err
		}
		name, err := d.atom("message data")
		if err != nil {
			return nil, err
		}
		switch name {
		case "EXISTS":
			r.Kind = RespExists
		case "RECENT":
			r.Kind = RespRecent
		case "EXPUNGE":
			if n == 0 {
				return nil, malformed("EXPUNGE of message 0")
			}
			r.Kind = RespExpunge
		case "FETCH":
			if n == 0 {
				return nil, malformed("FETCH of message 0")
			}
			r.Kind = RespFetch
			if err := d.expect(' ', "FETCH"); err != nil {
				return nil, err
			}
			if err := d.msgAtt(&r.Fetch); err != nil {
				return nil, err
			}
		default:
			r.Kind = RespOther
			return r, d.skipLine()
		}
		return r, d.crlf()
	}

	name, err := d.atom("response name")
	if err != nil {
		return nil, err
	}
	switch name {
	case "OK", "NO", "BAD", "BYE", "PREAUTH":
		r.Kind, r.Status = RespStatus, name
		return r, d.respText(r)
	case "CAPABILITY", "ENABLED":
		r.Kind = RespCapability
		if name == "ENABLED" {
			r.Kind = RespEnabled
		}
		r.Caps, err = d.atomList()
		return r, err
	case "FLAGS":
		r.Kind = RespFlags
		if err := d.expect(' ', "FLAGS"); err != nil {
			return nil, err
		}
		if _, err := d.flagList(); err != nil {
			return nil, err
		}
		return r, d.crlf()
	case "SEARCH":
		r.Kind = RespSearch
		return r, d.searchNumbers(r)
	case "ESEARCH":
		r.Kind = RespESearch
		return r, d.esearch(r)
	case "VANISHED":
		r.Kind = RespVanished
		return r, d.vanished(r)
	case "STATUS":
		r.Kind = RespMailboxStatus
		return r, d.mailboxStatus(r)
	}
	r.Kind = RespOther
	return r, d.skipLine()
}

// mailboxStatus reads the rest of a STATUS response (RFC 3501 §7.2.4,
// RFC 5465 §5): SP mailbox SP "(" [status-att-list] ")". The mailbox is
// kept, and the items StatusItems names; any other item is read to its
// end and dropped.
func (d *decoder) mailboxStatus(r *Response) error {
	if err := d.expect(' ', "STATUS"); err != nil {
		return err
	}
	name, err := d.mailbox()
	if err != nil {
		return err
	}
	if name == "" {
		return malformed("STATUS of no mailbox")
	}
	r.Mailbox = decodeMailbox(name)
	if err := d.expect(' ', "STATUS"); err != nil {
		return err
	}
	if b, err := d.peek(); err != nil {
		return err
	} else if b != '(' {
		return malformed("STATUS attribute list")
	}
	if err := d.statusItems(&r.Items); err != nil {
		return err
	}
	// Some servers end the list with a space before the line ending.
	if b, err := d.peek(); err == nil && b == ' ' {
		_, _ = d.next()
	}
	return d.crlf()
}

// statusItems reads a STATUS response's "(" [status-att-list] ")":
// status-att SP number pairs (RFC 3501 §9, RFC 7162 §7 for HIGHESTMODSEQ).
// An item it does not know is read as one value, list or atom, and
// dropped.
func (d *decoder) statusItems(it *StatusItems) error {
	if err := d.expect('(', "STATUS attribute list"); err != nil {
		return err
	}
	for {
		b, err := d.peek()
		if err != nil {
			return err
		}
		if b == ')' {
			_, _ = d.next()
			return nil
		}
		name, err := d.atom("STATUS attribute")
		if err != nil {
			return err
		}
		if err := d.expect(' ', "STATUS attribute"); err != nil {
			return err
		}
		switch name {
		case "MESSAGES":
			it.Messages, err = d.number32("STATUS MESSAGES")
		case "UIDNEXT":
			it.UIDNext, err = d.number32("STATUS UIDNEXT")
		case "UIDVALIDITY":
			it.UIDValidity, err = d.number32("STATUS UIDVALIDITY")
		case "HIGHESTMODSEQ":
			// Read as any 64-bit number: a server past the 63 bits RFC
			// 7162 §7 allows describes the folder no worse for it.
			var tok string
			if tok, err = d.token(isDigit, "STATUS HIGHESTMODSEQ"); err == nil {
				if it.HighestModSeq, err = strconv.ParseUint(tok, 10, 64); err != nil {
					err = malformed("STATUS HIGHESTMODSEQ")
				}
			}
		default:
			err = d.skipValue(0)
		}
		if err != nil {
			return err
		}
		if b, err = d.peek(); err != nil {
			return err
		}
		if b == ' ' {
			_, _ = d.next()
		} else if b != ')' {
			return malformed("STATUS attribute list")
		}
	}
}

// mailbox reads a mailbox name (RFC 3501 §9: "INBOX" / astring): an atom
// of ASTRING-CHARs, a quoted string or a literal, bounded like a quoted
// string.
func (d *decoder) mailbox() (string, error) {
	b, err := d.peek()
	if err != nil {
		return "", err
	}
	switch b {
	case '"':
		return d.quoted()
	case '{':
		return d.literalString(maxStringBytes, "mailbox name too long")
	}
	return d.token(isAstringChar, "mailbox")
}

// respText reads resp-text (RFC 3501 §9) to the end of the line: an
// optional response code and a text, which is dropped. It is lenient about
// the space before the code and a missing text, as servers are.
func (d *decoder) respText(r *Response) error {
	b, err := d.peek()
	if err != nil {
		return err
	}
	if b == ' ' {
		_, _ = d.next()
		if b, err = d.peek(); err != nil {
			return err
		}
	}
	if b == '[' {
		_, _ = d.next()
		code, err := d.token(isCodeChar, "response code")
		if err != nil {
			return err
		}
		r.Code = strings.ToUpper(code)
		var arg string
		if b, err = d.peek(); err != nil {
			return err
		}
		if b == ' ' {
			_, _ = d.next()
			if arg, err = d.codeArg(); err != nil {
				return err
			}
		}
		if err := d.expect(']', "response code"); err != nil {
			return err
		}
		if err := r.readCode(arg); err != nil {
			return err
		}
	}
	switch r.Status {
	case "NO", "BAD", "BYE":
		return d.throttleText(r)
	}
	return d.skipText()
}

// throttleText reads the text of a NO, BAD or BYE to its end, as skipText
// does, and sets r.Throttle from its first maxThrottleText bytes, which
// are dropped with the rest.
func (d *decoder) throttleText(r *Response) error {
	var buf [maxThrottleText]byte
	text := buf[:0]
	for n := 0; ; n++ {
		c, err := d.peek()
		if err != nil {
			return err
		}
		if c == '\r' || c == '\n' {
			r.Throttle = Throttling(r.Status, r.Code, string(text))
			return d.crlf()
		}
		if c == 0 {
			return malformed("NUL in text")
		}
		if n >= maxStringBytes {
			return malformed("text too long")
		}
		_, _ = d.next()
		if len(text) < cap(text) {
			text = append(text, c)
		}
	}
}

// readCode interprets the argument of the response codes this package uses.
func (r *Response) readCode(arg string) error {
	var err error
	switch r.Code {
	case "UIDVALIDITY":
		r.UIDValidity, err = parseNumber32(arg, true)
	case "UIDNEXT":
		r.UIDNext, err = parseNumber32(arg, false)
	case "HIGHESTMODSEQ":
		r.HighestModSeq, err = parseModSeq(arg)
	case "CAPABILITY":
		r.Caps = strings.Fields(arg)
		if len(r.Caps) > maxCaps {
			return malformed("capability list too long")
		}
	}
	if err != nil {
		return malformed("argument of response code " + r.Code)
	}
	return nil
}

// codeArg reads a response code's argument: everything up to "]" (RFC 3501
// §9: 1*<any TEXT-CHAR except "]">).
func (d *decoder) codeArg() (string, error) {
	var b strings.Builder
	for {
		c, err := d.peek()
		if err != nil {
			return "", err
		}
		if c == ']' {
			return b.String(), nil
		}
		if c == '\r' || c == '\n' || c == 0 {
			return "", malformed("response code argument")
		}
		if b.Len() >= maxStringBytes {
			return "", malformed("response code argument too long")
		}
		_, _ = d.next()
		b.WriteByte(c)
	}
}

// skipText reads a text to the end of the line and drops it.
func (d *decoder) skipText() error {
	for n := 0; ; n++ {
		c, err := d.peek()
		if err != nil {
			return err
		}
		if c == '\r' || c == '\n' {
			return d.crlf()
		}
		if c == 0 {
			return malformed("NUL in text")
		}
		if n >= maxStringBytes {
			return malformed("text too long")
		}
		_, _ = d.next()
	}
}

// atomList reads *(SP atom) to the end of the line.
func (d *decoder) atomList() ([]string, error) {
	var out []string
	for {
		b, err := d.peek()
		if err != nil {
			return nil, err
		}
		if b == '\r' || b == '\n' {
			return out, d.crlf()
		}
		if err := d.expect(' ', "atom list"); err != nil {
			return nil, err
		}
		if b, err = d.peek(); err != nil {
			return nil, err
		}
		if b == '\r' || b == '\n' {
			continue // a trailing space
		}
		a, err := d.token(isAtomChar, "atom")
		if err != nil {
			return nil, err
		}
		if len(out) >= maxCaps {
			return nil, malformed("atom list too long")
		}
		out = append(out, a)
	}
}

// skipValue reads one value of any kind and drops it: an atom, number or
// NIL, a quoted string, a literal or a parenthesized list of values.
func (d *decoder) skipValue(depth int) error {
	b, err := d.peek()
	if err != nil {
		return err
	}
	switch b {
	case '(':
		if depth >= maxNesting {
			return malformed("lists nested too deeply")
		}
		_, _ = d.next()
		for first := true; ; first = false {
			if b, err = d.peek(); err != nil {
				return err
			}
			if b == ')' {
				_, _ = d.next()
				return nil
			}
			if !first {
				if err := d.expect(' ', "list"); err != nil {
					return err
				}
			}
			if err := d.skipValue(depth + 1); err != nil {
				return err
			}
		}
	case '"':
		_, err := d.quoted()
		return err
	case '{':
		return d.skipLiteral()
	case '~': // literal8, RFC 3516
		_, _ = d.next()
		return d.skipLiteral()
	}
	_, err = d.token(isValueChar, "value")
	return err
}

// skipLine reads the rest of a response this package does not use and
// drops it. Such a response has no grammar here, so only a literal
// announced at the end of a line ("{n}" or "{n+}" before the line ending,
// RFC 3501 §4.3) is taken as one, and consumed by its length.
func (d *decoder) skipLine() error {
	var tail []byte // the bytes since the last "{", while they can still be a literal announcement
	for {
		c, err := d.next()
		if err != nil {
			return err
		}
		switch {
		case c == '\n':
			n, ok := literalAnnouncement(tail)
			if !ok {
				return nil
			}
			if err := d.discard(n); err != nil {
				return err
			}
			tail = nil
			continue
		case c == 0:
			return malformed("NUL in a response")
		case c == '{':
			tail = append(tail[:0], c)
			continue
		}
		if tail != nil {
			if len(tail) > 16 {
				tail = nil
			} else {
				tail = append(tail, c)
			}
		}
	}
}

// literalAnnouncement recognizes "{n}", "{n+}" and the same followed by CR.
func literalAnnouncement(tail []byte) (int64, bool) {
	s := strings.TrimSuffix(string(tail), "\r")
	if len(s) < 3 || s[0] != '{' || s[len(s)-1] != '}' {
		return 0, false
	}
	s = strings.TrimSuffix(s[1:len(s)-1], "+")
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// skipLiteral reads "{n}" or "{n+}", the line ending, and n bytes.
func (d *decoder) skipLiteral() error {
	n, err := d.literalHeader()
	if err != nil {
		return err
	}
	return d.discard(n)
}

func (d *decoder) literalHeader() (int64, error) {
	if err := d.expect('{', "literal"); err != nil {
		return 0, err
	}
	tok, err := d.token(isDigit, "literal")
	if err != nil {
		return 0, err
	}
	b, err := d.peek()
	if err != nil {
		return 0, err
	}
	if b == '+' {
		_, _ = d.next()
	}
	if err := d.expect('}', "literal"); err != nil {
		return 0, err
	}
	if err := d.crlf(); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return 0, malformed("literal length")
	}
	return n, nil
}

// discard drops n bytes of a literal.
func (d *decoder) discard(n int64) error {
	if n > int64(d.budget) {
		return malformed("literal too large")
	}
	m, err := d.r.Discard(int(n))
	d.budget -= m
	if err != nil {
		return ioError(err)
	}
	return nil
}

// astring reads an atom, a quoted string or a literal (RFC 3501 §9), for
// the ESEARCH correlator.
func (d *decoder) astring() (string, error) {
	b, err := d.peek()
	if err != nil {
		return "", err
	}
	switch b {
	case '"':
		return d.quoted()
	case '{':
		return d.literalString(maxTokenBytes, "literal too large")
	}
	return d.token(isTagChar, "astring")
}

// literalString reads a literal (RFC 3501 §4.3) of at most limit bytes as
// a string; a longer one is malformed, named by tooLong.
func (d *decoder) literalString(limit int64, tooLong string) (string, error) {
	n, err := d.literalHeader()
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", malformed(tooLong)
	}
	buf := make([]byte, n)
	for i := range buf {
		if buf[i], err = d.next(); err != nil {
			return "", err
		}
	}
	return string(buf), nil
}

// quoted reads a quoted string (RFC 3501 §9).
func (d *decoder) quoted() (string, error) {
	if err := d.expect('"', "quoted string"); err != nil {
		return "", err
	}
	var b strings.Builder
	for {
		c, err := d.next()
		if err != nil {
			return "", err
		}
		switch c {
		case '"':
			return b.String(), nil
		case '\\':
			if c, err = d.next(); err != nil {
				return "", err
			}
		}
		if c == '\r' || c == '\n' || c == 0 {
			return "", malformed("quoted string")
		}
		if b.Len() >= maxStringBytes {
			return "", malformed("quoted string too long")
		}
		b.WriteByte(c)
	}
}

// atom reads an atom and upper-cases it.
func (d *decoder) atom(what string) (string, error) {
	a, err := d.token(isAtomChar, what)
	return strings.ToUpper(a), err
}

// token reads 1..maxTokenBytes bytes that satisfy ok.
func (d *decoder) token(ok func(byte) bool, what string) (string, error) {
	var buf [64]byte
	tok := buf[:0]
	for {
		b, err := d.peek()
		if err != nil {
			return "", err
		}
		if !ok(b) {
			break
		}
		if len(tok) >= maxTokenBytes {
			return "", malformed(what + " too long")
		}
		_, _ = d.next()
		tok = append(tok, b)
	}
	if len(tok) == 0 {
		return "", malformed(what)
	}
	return string(tok), nil
}

// number32 reads a number of at most 32 bits.
func (d *decoder) number32(what string) (uint32, error) {
	tok, err := d.token(isDigit, what)
	if err != nil {
		return 0, err
	}
	n, err := parseNumber32(tok, false)
	if err != nil {
		return 0, malformed(what)
	}
	return n, nil
}

func parseNumber32(s string, nonZero bool) (uint32, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a number")
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, err
	}
	if nonZero && n == 0 {
		return 0, errors.New("zero")
	}
	return uint32(n), nil
}

// parseModSeq parses a mod-sequence value, which RFC 7162 §7 bounds to 63
// bits.
func parseModSeq(s string) (uint64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a number")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt64 {
		return 0, errors.New("mod-sequence above 63 bits")
	}
	return n, nil
}

// crlf reads a line ending: CRLF, or a bare LF.
func (d *decoder) crlf() error {
	c, err := d.next()
	if err != nil {
		return err
	}
	if c == '\r' {
		if c, err = d.next(); err != nil {
			return err
		}
	}
	if c != '\n' {
		return malformed("line ending")
	}
	return nil
}

func (d *decoder) expect(c byte, what string) error {
	b, err := d.next()
	if err != nil {
		return err
	}
	if b != c {
		return malformed(what)
	}
	return nil
}

// peekStart peeks at the first byte of a response, where the end of the
// stream is an ordinary close rather than a truncated response.
func (d *decoder) peekStart() (byte, error) {
	b, err := d.r.Peek(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (d *decoder) peek() (byte, error) {
	b, err := d.r.Peek(1)
	if err != nil {
		return 0, ioError(err)
	}
	return b[0], nil
}

func (d *decoder) next() (byte, error) {
	if d.budget <= 0 {
		return 0, malformed("response too large")
	}
	b, err := d.r.ReadByte()
	if err != nil {
		return 0, ioError(err)
	}
	d.budget--
	return b, nil
}

// ioError turns the end of the stream inside a response into
// io.ErrUnexpectedEOF.
func ioError(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isAtomChar is ATOM-CHAR (RFC 3501 §9): a printable US-ASCII character
// other than the atom-specials ( ) { SP % * " \ ].
func isAtomChar(c byte) bool {
	if c <= ' ' || c >= 0x7f {
		return false
	}
	switch c {
	case '(', ')', '{', '%', '*', '"', '\\', ']':
		return false
	}
	return true
}

// isTagChar is ASTRING-CHAR except "+" (RFC 3501 §9 tag).
func isTagChar(c byte) bool { return c != '+' && (isAtomChar(c) || c == ']') }

// isAstringChar is ASTRING-CHAR (RFC 3501 §9): ATOM-CHAR or "]".
func isAstringChar(c byte) bool { return isAtomChar(c) || c == ']' }

// isCodeChar is a character of a response code's atom.
func isCodeChar(c byte) bool { return isAtomChar(c) }

// isItemChar is a character of a FETCH data item name before its section.
func isItemChar(c byte) bool { return c != '[' && isAtomChar(c) }

// isValueChar is a character of an atom-like value this package skips: an
// atom, a number, NIL, a flag or a section, and 8-bit bytes of servers that
// send UTF-8 unquoted.
func isValueChar(c byte) bool {
	switch {
	case c >= 0x80:
		return true
	case c <= ' ' || c == 0x7f:
		return false
	}
	switch c {
	case '(', ')', '{', '"':
		return false
	}
	return true
}
