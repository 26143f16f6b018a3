package failure

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// ConnectionLoss describes, without its text, how the connection under a
// call went away or never came up: "timed out", "connection refused",
// "connection reset" (a reset or a broken pipe), "connection closed" (a
// stream closed or cut short) or "network error" (any other net.Error). It
// returns "" for a failure that says no such thing. Whether a lost
// connection is worth repeating is each caller's decision, not this one's.
func ConnectionLoss(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.As(err, &ne):
		return "network error"
	}
	return ""
}

// ConnectionLost reports whether err says the connection under a call went
// away or never came up, so no answer arrived (ConnectionLoss).
func ConnectionLost(err error) bool { return ConnectionLoss(err) != "" }
