package imapx

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/emersion/go-message/charset"
	"github.com/mailfathom/mailfathom/imapx/internal/wire"
	"github.com/mailfathom/mailfathom/internal/sasl"
)

// conn is one IMAP connection of a session while go-imap drives it.
type conn struct {
	sock   *wire.Socket // the dialed socket, its broken flag and its kill
	client *imapclient.Client
	tls    bool
	// compression is what dialRead decided about COMPRESS=DEFLATE
	// (compress.go).
	compression Compression
	// expunges counts the EXPUNGE responses the server sent outside an
	// EXPUNGE command: another session removed messages from the open
	// folder.
	expunges atomic.Int64
	// watch reads what go-imap reads for a BYE that throttles, which
	// go-imap drops; nil before go-imap is attached.
	watch *wire.ByeWatch
	// gate lends the stream go-imap reads to the wire layer between two
	// of go-imap's commands (lend.go); nil before go-imap is attached.
	gate *gate
}

// byeThrottle returns what a BYE that throttles, read by go-imap on c,
// said, and false when go-imap read none.
func (c *conn) byeThrottle() (wire.Throttle, bool) {
	if c.watch == nil {
		return wire.Throttle{}, false
	}
	return c.watch.Throttle()
}

// attach puts a go-imap client on stream, behind a ByeWatch and a gate.
func (c *conn) attach(stream net.Conn) {
	c.gate = newGate(stream)
	c.watch = wire.WatchBye(c.gate)
	c.client = imapclient.New(c.watch, c.clientOptions())
}

// kill marks the connection unusable and closes the socket without a word
// to the server. Safe to call more than once and from any goroutine.
func (c *conn) kill() { c.sock.Kill() }

// ended reports whether go-imap's reader has stopped: it saw the
// connection end (the server closed it, the network reset it) or read
// something it could not parse, or the connection was killed. It sends
// nothing and does not block.
func (c *conn) ended() bool {
	if c.client == nil {
		return false
	}
	select {
	case <-c.client.Closed():
		return true
	default:
		return false
	}
}

// closeWait bounds how long closing waits for go-imap's reader goroutine.
const closeWait = 5 * time.Second

// shutdown kills the connection and waits, bounded, for go-imap's reader to
// end so no goroutine outlives the session.
func (c *conn) shutdown() {
	c.kill()
	if c.client == nil {
		return
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-c.client.Closed():
	case <-t.C:
	}
}

// clientOptions are the options of every go-imap client driving cn.
func (c *conn) clientOptions() *imapclient.Options {
	return &imapclient.Options{
		WordDecoder: wordDecoder,
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Expunge: func(uint32) { c.expunges.Add(1) },
		},
	}
}

// wordDecoder decodes RFC 2047 words in envelopes with go-message's charset
// collection rather than only UTF-8 and Latin-1.
var wordDecoder = &mime.WordDecoder{CharsetReader: charset.Reader}

// dial opens a connection and authenticates it. On failure nothing stays
// open.
func dial(ctx context.Context, ep Endpoint, opts SessionOptions) (*conn, imap.CapSet, error) {
	return dialVia(ctx, ep, opts, nil)
}

// dialVia is dial with h, when not nil, put between the protected stream
// and go-imap, so that the connection can be taken over from go-imap once
// it is authenticated (handoff.go).
func dialVia(ctx context.Context, ep Endpoint, opts SessionOptions, h *handoff) (_ *conn, _ imap.CapSet, err error) {
	timeout := opts.commandTimeout()
	if err := ep.checkPolicy(); err != nil {
		return nil, nil, err
	}
	if ep.TLSConfig != nil && ep.TLSConfig.InsecureSkipVerify {
		return nil, nil, &TLSError{Err: errInsecureSkipVerify}
	}
	security := ep.Security
	switch security {
	case "":
		security = TLSOnConnect // configuration's default; never plaintext by omission
	case TLSOnConnect, StartTLSRequired, StartTLSWhenAvailable, None:
	case Auto:
		if ep.Port == 993 {
			security = TLSOnConnect
		} else {
			security = StartTLSWhenAvailable
		}
	default:
		return nil, nil, fmt.Errorf("imapx: unknown connection security %q", ep.Security)
	}

	dialCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dialFn := ep.Dial
	if dialFn == nil {
		dialFn = (&net.Dialer{}).DialContext
	}
	raw, err := dialFn(dialCtx, "tcp", ep.address())
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("imapx: dial: %w", ctx.Err())
		}
		if dialCtx.Err() != nil {
			err = wire.ErrTimedOut
		}
		return nil, nil, &TransportError{Op: "dial", Err: err}
	}

	cn := &conn{sock: wire.NewSocket(raw)}
	w := wire.StartWatchdog(ctx, cn.sock, timeout)
	defer func() {
		reason := w.Stop()
		if err == nil {
			return
		}
		// A failure after the watchdog fired is its consequence.
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("imapx: connect: %w", ctx.Err())
		case reason != nil:
			err = &TransportError{Op: "connect", Err: wire.ErrTimedOut}
		}
		cn.shutdown()
	}()

	tlsConfig := clientTLSConfig(ep)

	var stream net.Conn
	switch security {
	case TLSOnConnect:
		if tlsConfig.NextProtos == nil {
			tlsConfig.NextProtos = []string{"imap"}
		}
		tc := tls.Client(raw, tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, nil, handshakeError(err)
		}
		stream, cn.tls = tc, true
	default:
		s, upgraded, err := negotiatePlain(ctx, raw, security, tlsConfig)
		if err != nil {
			return nil, nil, err
		}
		stream, cn.tls = s, upgraded
	}

	// What go-imap and the wire layer write is counted from here on, above
	// TLS, so a command can tell whether any of its bytes left (see
	// WriteConnection.run).
	stream = cn.sock.Counted(stream)
	if h != nil {
		h.Conn = stream
		stream = h
	}
	// go-imap beta.8 sends an empty SASL response as "=", which Dovecot
	// refuses; SCRAM's final response is empty. The fix applies only until
	// authentication is done.
	fix := sasl.FixEmptyResponses(stream)
	cn.attach(fix)
	if err := cn.client.WaitGreeting(); err != nil {
		var imapErr *imap.Error
		if errors.As(err, &imapErr) {
			bye := &TransportError{Op: "greeting", Err: wire.ErrServerBye}
			return nil, nil, throttled(wire.Throttling(string(imapErr.Type), string(imapErr.Code), imapErr.Text), bye)
		}
		return nil, nil, &TransportError{Op: "greeting", Err: err}
	}
	if cn.client.State() == imap.ConnStateNotAuthenticated {
		if err := authenticate(ctx, cn.client, ep, cn.tls); err != nil {
			// A server that ends the session with a BYE that throttles
			// while the credential is being checked has not rejected it.
			var lost *TransportError
			if t, ok := cn.byeThrottle(); ok && errors.As(err, &lost) {
				return nil, nil, throttled(t, &TransportError{Op: lost.Op, Err: wire.ErrServerBye})
			}
			return nil, nil, err
		}
	}
	fix.Stop()
	caps := cn.client.Caps()
	if caps == nil {
		return nil, nil, &TransportError{Op: "CAPABILITY", Err: wire.ErrConnectionUnusable}
	}
	return cn, caps.Copy(), nil
}

func clientTLSConfig(ep Endpoint) *tls.Config {
	var c *tls.Config
	if ep.TLSConfig != nil {
		c = ep.TLSConfig.Clone()
	} else {
		c = &tls.Config{}
	}
	if c.ServerName == "" {
		c.ServerName = ep.Host
	}
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// handshakeError separates a handshake the client refused or the server
// rejected (terminal) from one the network interrupted (transient).
func handshakeError(err error) error {
	var (
		verr *tls.CertificateVerificationError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
		aerr tls.AlertError
		rerr tls.RecordHeaderError
	)
	if errors.As(err, &verr) || errors.As(err, &uerr) || errors.As(err, &herr) || errors.As(err, &cerr) ||
		errors.As(err, &aerr) || errors.As(err, &rerr) || isRemoteAlert(err) {
		return &TLSError{Err: err}
	}
	return &TransportError{Op: "TLS handshake", Err: err}
}

// isRemoteAlert recognizes an alert the server sent, which crypto/tls reports
// as a *net.OpError with Op "remote error" around an unexported alert type.
func isRemoteAlert(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "remote error"
}

// maxPreLine bounds one response line read before go-imap takes over.
const maxPreLine = 64 << 10

// negotiatePlain handles a connection that starts unencrypted: it reads the
// greeting and the capabilities itself, runs STARTTLS when security asks for
// it, and returns the stream go-imap should read, plus whether it is TLS.
//
// go-imap can only issue STARTTLS unconditionally, before it has seen the
// capabilities, so the decision is made here. After the upgrade go-imap is
// handed the TLS stream behind a synthetic greeting without capabilities,
// which makes it ask for them again as RFC 3501 requires after STARTTLS.
// Without an upgrade it is handed the server's own greeting again.
func negotiatePlain(ctx context.Context, raw net.Conn, security ConnectionSecurity, tlsConfig *tls.Config) (net.Conn, bool, error) {
	br := bufio.NewReader(raw)
	greeting, err := readLine(br)
	if err != nil {
		return nil, false, &TransportError{Op: "greeting", Err: err}
	}
	status, caps, ok := parseGreeting(greeting)
	if !ok {
		return nil, false, &TransportError{Op: "greeting", Err: errUnparsable}
	}
	switch status {
	case "BYE":
		return nil, false, throttled(wire.LineThrottle(greeting), &TransportError{Op: "greeting", Err: wire.ErrServerBye})
	case "PREAUTH":
		// STARTTLS is only possible before authentication.
		if security == StartTLSRequired {
			return nil, false, ErrStartTLSUnavailable
		}
		return replayConn(raw, br, greeting), false, nil
	}
	if security == None {
		return replayConn(raw, br, greeting), false, nil
	}
	if caps == nil {
		caps, err = preCapability(raw, br)
		if err != nil {
			return nil, false, err
		}
	}
	if !caps[imap.CapStartTLS] {
		if security == StartTLSRequired {
			return nil, false, ErrStartTLSUnavailable
		}
		return replayConn(raw, br, greeting), false, nil
	}

	if _, err := io.WriteString(raw, "M2 STARTTLS\r\n"); err != nil {
		return nil, false, &TransportError{Op: "STARTTLS", Err: err}
	}
	for {
		line, err := readLine(br)
		if err != nil {
			return nil, false, &TransportError{Op: "STARTTLS", Err: err}
		}
		if !strings.HasPrefix(line, "M2 ") {
			continue // untagged data
		}
		if st := statusWord(line[3:]); st != "OK" {
			return nil, false, &CommandError{Command: "STARTTLS", Status: st, Code: responseCode(line[3:])}
		}
		break
	}
	// Anything the server sent after its OK and before the handshake would
	// be read as if it had come over TLS (the STARTTLS injection attacks).
	if br.Buffered() > 0 {
		return nil, false, fmt.Errorf("imapx: STARTTLS: data after the server's OK: %w", ErrProtocolViolation)
	}
	tc := tls.Client(raw, tlsConfig)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, false, handshakeError(err)
	}
	return &prefixConn{Conn: tc, r: io.MultiReader(strings.NewReader(syntheticGreeting), tc)}, true, nil
}

// syntheticGreeting stands in for the greeting go-imap waits for after the
// STARTTLS upgrade it did not run itself.
const syntheticGreeting = "* OK TLS established\r\n"

var errUnparsable = errors.New("unparsable response line")

// preCapability runs CAPABILITY before go-imap takes over.
func preCapability(raw net.Conn, br *bufio.Reader) (map[imap.Cap]bool, error) {
	if _, err := io.WriteString(raw, "M1 CAPABILITY\r\n"); err != nil {
		return nil, &TransportError{Op: "CAPABILITY", Err: err}
	}
	caps := map[imap.Cap]bool{}
	for {
		line, err := readLine(br)
		if err != nil {
			return nil, &TransportError{Op: "CAPABILITY", Err: err}
		}
		switch {
		case strings.HasPrefix(strings.ToUpper(line), "* CAPABILITY "):
			for _, c := range strings.Fields(line[len("* CAPABILITY "):]) {
				caps[imap.Cap(strings.ToUpper(c))] = true
			}
		case strings.HasPrefix(line, "M1 "):
			if st := statusWord(line[3:]); st != "OK" {
				return nil, &CommandError{Command: "CAPABILITY", Status: st, Code: responseCode(line[3:])}
			}
			if c := parseCapCode(line[3:]); c != nil {
				for k := range c {
					caps[k] = true
				}
			}
			return caps, nil
		}
	}
}

// readLine reads one CRLF-terminated line, without the line ending. A line
// announcing a literal is refused: nothing before authentication sends one.
func readLine(br *bufio.Reader) (string, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxPreLine {
			return "", errUnparsable
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		break
	}
	s := strings.TrimRight(string(line), "\r\n")
	if strings.HasSuffix(s, "}") {
		return "", errUnparsable
	}
	return s, nil
}

// parseGreeting returns the greeting's status (OK, PREAUTH or BYE) and the
// capabilities of a [CAPABILITY ...] code, nil when it carries none.
func parseGreeting(line string) (status string, caps map[imap.Cap]bool, ok bool) {
	if !strings.HasPrefix(line, "* ") {
		return "", nil, false
	}
	rest := line[2:]
	status = statusWord(rest)
	switch status {
	case "OK", "PREAUTH", "BYE":
	default:
		return "", nil, false
	}
	return status, parseCapCode(rest), true
}

// statusWord returns the upper-cased first word of a status response.
func statusWord(s string) string {
	word, _, _ := strings.Cut(s, " ")
	return strings.ToUpper(word)
}

// responseCode returns the atom of the response code after the status word,
// e.g. "NONEXISTENT" from "NO [NONEXISTENT] text"; "" when there is none.
func responseCode(s string) string {
	_, rest, _ := strings.Cut(s, " ")
	if !strings.HasPrefix(rest, "[") {
		return ""
	}
	end := strings.IndexAny(rest, " ]")
	if end < 0 {
		return ""
	}
	return strings.ToUpper(rest[1:end])
}

// parseCapCode returns the capabilities of a "STATUS [CAPABILITY ...] text"
// response, nil when it has no CAPABILITY code.
func parseCapCode(s string) map[imap.Cap]bool {
	_, rest, _ := strings.Cut(s, " ")
	const prefix = "[CAPABILITY "
	if len(rest) < len(prefix) || !strings.EqualFold(rest[:len(prefix)], prefix) {
		return nil
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return nil
	}
	caps := map[imap.Cap]bool{}
	for _, c := range strings.Fields(rest[len(prefix):end]) {
		caps[imap.Cap(strings.ToUpper(c))] = true
	}
	return caps
}

// replayConn returns raw with the greeting, and whatever the reader had
// buffered after it, to be read again first.
func replayConn(raw net.Conn, br *bufio.Reader, greeting string) net.Conn {
	buffered, _ := br.Peek(br.Buffered())
	var b bytes.Buffer
	b.WriteString(greeting)
	b.WriteString("\r\n")
	b.Write(buffered)
	return &prefixConn{Conn: raw, r: io.MultiReader(&b, raw)}
}

// prefixConn is a net.Conn whose reads come from r (a prefix, then the
// connection itself).
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }
