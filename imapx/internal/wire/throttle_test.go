package wire

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestThrottling: every form in which a server says it refuses work for a
// while is read as its fixed reason, with the delay it suggested; what is
// not such an answer does not throttle.
func TestThrottling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status, code, text string
		want               Throttle
	}{
		{"NO", "UNAVAILABLE", "Service temporarily unavailable", Throttle{Reason: ThrottleUnavailable}},
		{"NO", "LIMIT", "Too many open connections for this account", Throttle{Reason: ThrottleLimit}},
		{"NO", "OVERQUOTA", "Download quota exceeded", Throttle{Reason: ThrottleOverQuota}},
		{"NO", "INUSE", "Mailbox in use", Throttle{Reason: ThrottleInUse}},
		{"NO", "THROTTLED", "Slow down", Throttle{Reason: ThrottleThrottled}},
		{"BAD", "THROTTLED", "", Throttle{Reason: ThrottleThrottled}},
		{"NO", "", "Request is throttled. Suggested Backoff Time: 92415 milliseconds", Throttle{Reason: ThrottleRequestThrottled, Delay: 92415 * time.Millisecond}},
		{"NO", "", "request is throttled", Throttle{Reason: ThrottleRequestThrottled}},
		{"NO", "UNAVAILABLE", "Try later. Suggested Backoff Time: 2 seconds", Throttle{Reason: ThrottleUnavailable, Delay: 2 * time.Second}},
		{"NO", "", "Suggested Backoff Time: 99999999999999 milliseconds", Throttle{Reason: ThrottleRequestThrottled, Delay: MaxSuggestedDelay}},
		{"BYE", "ALERT", "Account exceeded command or bandwidth limits. r14mb1234", Throttle{Reason: ThrottleBandwidthExceeded}},
		{"NO", "ALERT", "Too many simultaneous connections. (Failure)", Throttle{Reason: ThrottleTooManyConnections}},
		{"NO", "ALERT", "Account exceeded command or bandwidth limits.", Throttle{Reason: ThrottleBandwidthExceeded}},

		{"OK", "UNAVAILABLE", "not a refusal", Throttle{}},
		{"NO", "NONEXISTENT", "No such folder", Throttle{}},
		{"NO", "AUTHENTICATIONFAILED", "Authentication failed.", Throttle{}},
		{"BYE", "", "Logging out", Throttle{}},
		{"BYE", "ALERT", "Server shutting down.", Throttle{}},
		{"NO", "", "Suggested Backoff Time: soon", Throttle{}},
		// Only the text's beginning is read.
		{"NO", "", strings.Repeat("x", maxThrottleText) + " request is throttled", Throttle{}},
	} {
		require.Equal(t, tc.want, Throttling(tc.status, tc.code, tc.text), "%s [%s] %s", tc.status, tc.code, tc.text)
	}
}

func TestLineThrottle(t *testing.T) {
	t.Parallel()
	require.Equal(t, Throttle{Reason: ThrottleBandwidthExceeded}, LineThrottle("* BYE [ALERT] Account exceeded command or bandwidth limits"))
	require.Equal(t, Throttle{Reason: ThrottleUnavailable}, LineThrottle("A1 no [unavailable] later"))
	require.Equal(t, Throttle{Reason: ThrottleLimit}, LineThrottle("* BYE [LIMIT]"))
	require.Equal(t, Throttle{Reason: ThrottleRequestThrottled, Delay: 1500 * time.Millisecond},
		LineThrottle("* BYE Request is throttled. Suggested Backoff Time: 1500 milliseconds"))
	require.Equal(t, Throttle{}, LineThrottle("* OK [UNAVAILABLE] fine"))
	require.Equal(t, Throttle{}, LineThrottle("* BYE Dovecot ready"))
	require.Equal(t, Throttle{}, LineThrottle("garbage"))
	require.Equal(t, Throttle{}, LineThrottle("* BYE [UNAVAILABLE unterminated"))
}

// TestDecodeReadsThrottling: the decoder sets Response.Throttle from a
// tagged or untagged NO, BAD or BYE, and keeps no text.
func TestDecodeReadsThrottling(t *testing.T) {
	t.Parallel()
	r := decodeOne(t, "R3 NO [UNAVAILABLE] Backend down for maintenance\r\n")
	require.Equal(t, RespTagged, r.Kind)
	require.Equal(t, "UNAVAILABLE", r.Code)
	require.Equal(t, Throttle{Reason: ThrottleUnavailable}, r.Throttle)

	r = decodeOne(t, "R4 NO Request is throttled. Suggested Backoff Time: 250 milliseconds\r\n")
	require.Equal(t, Throttle{Reason: ThrottleRequestThrottled, Delay: 250 * time.Millisecond}, r.Throttle)

	r = decodeOne(t, "* BYE [ALERT] Account exceeded command or bandwidth limits\r\n")
	require.Equal(t, RespStatus, r.Kind)
	require.Equal(t, "BYE", r.Status)
	require.Equal(t, Throttle{Reason: ThrottleBandwidthExceeded}, r.Throttle)

	r = decodeOne(t, "R5 OK [UNAVAILABLE] odd but fine\r\n")
	require.Equal(t, Throttle{}, r.Throttle)
	r = decodeOne(t, "R6 NO [NONEXISTENT] gone\r\n")
	require.Equal(t, Throttle{}, r.Throttle)
}

// TestConnReportsThrottling: a command of the adapter's own layer answered
// with a NO that throttles, or ended by a BYE that does, carries the
// throttle on its error; one that does not carries none.
func TestConnReportsThrottling(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, answer string) error {
		client, server := net.Pipe()
		t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
		go func() {
			line := make([]byte, 256)
			_, _ = server.Read(line)
			_, _ = io.WriteString(server, answer)
			_ = server.Close()
		}()
		c := New(NewSocket(client), client, nil, 10)
		return c.run(t.Context(), 5*time.Second, "UID SEARCH", "ALL", nil)
	}

	err := run(t, "R1 NO [LIMIT] Too many commands\r\n")
	var cmd *CommandError
	require.ErrorAs(t, err, &cmd)
	require.Equal(t, Throttle{Reason: ThrottleLimit}, cmd.Throttle)
	require.NotContains(t, err.Error(), "Too many")

	err = run(t, "* BYE [ALERT] Account exceeded command or bandwidth limits\r\n")
	var tr *TransportError
	require.ErrorAs(t, err, &tr)
	require.ErrorIs(t, err, ErrServerBye)
	require.Equal(t, Throttle{Reason: ThrottleBandwidthExceeded}, tr.Throttle)
	require.NotContains(t, err.Error(), "bandwidth")

	err = run(t, "* BYE Shutting down\r\n")
	require.ErrorAs(t, err, &tr)
	require.Equal(t, Throttle{}, tr.Throttle)

	err = run(t, "R1 NO [NONEXISTENT] nothing\r\n")
	require.ErrorAs(t, err, &cmd)
	require.Equal(t, Throttle{}, cmd.Throttle)
}

// TestByeWatch: the watch notes a BYE that throttles wherever the reads
// split the stream, and never takes a literal's bytes — message content —
// for a response.
func TestByeWatch(t *testing.T) {
	t.Parallel()
	const body = "Subject: hi\r\n\r\n* BYE [ALERT] Account exceeded command or bandwidth limits\r\n"
	forged := "* 1 FETCH (UID 7 BODY[] {" + strconv.Itoa(len(body)) + "}\r\n" + body + ")\r\n" +
		"* 2 FETCH (UID 8 BODY[] ~{" + strconv.Itoa(len(body)) + "}\r\n" + body + ")\r\n" +
		"A4 OK done\r\n* BYE Logging out\r\n"
	genuine := "* 1 FETCH (UID 7 BODY[] {3}\r\nabc)\r\n* bye [ALERT] Account exceeded command or bandwidth limits\r\n"

	for _, chunk := range []int{1, 2, 3, 7, 64, 1 << 16} {
		w := watchThrough(t, forged, chunk)
		_, seen := w.Throttle()
		require.False(t, seen, "content inside a literal is no response (reads of %d bytes)", chunk)

		w = watchThrough(t, genuine, chunk)
		got, seen := w.Throttle()
		require.True(t, seen, "reads of %d bytes", chunk)
		require.Equal(t, Throttle{Reason: ThrottleBandwidthExceeded}, got)
	}
	w := watchThrough(t, "* BYE [UNAVAILABLE] "+strings.Repeat("x", 4*maxByeLine)+"\r\n", 100)
	got, seen := w.Throttle()
	require.True(t, seen)
	require.Equal(t, ThrottleUnavailable, got.Reason)
}

// watchThrough reads stream through a ByeWatch, chunk bytes at a time,
// and checks every byte came through unchanged.
func watchThrough(t *testing.T, stream string, chunk int) *ByeWatch {
	t.Helper()
	w := WatchBye(&readerConn{r: strings.NewReader(stream)})
	var out bytes.Buffer
	buf := make([]byte, chunk)
	for {
		n, err := w.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	require.Equal(t, stream, out.String())
	return w
}

// readerConn is a net.Conn reading from r.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }
