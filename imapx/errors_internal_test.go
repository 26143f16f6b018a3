package imapx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// TestFromWire: the reconciliation connection's errors reach callers as
// this package's types, with the same text followed by their identity, and
// the same cause; the Go type is what a failure's name falls back to, so it
// must be imapx's.
func TestFromWire(t *testing.T) {
	require.NoError(t, fromWire(nil))

	wcmd := &wire.CommandError{Command: "UID SEARCH", Status: "BAD", Code: "CLIENTBUG"}
	cmd := fromWire(wcmd)
	require.Equal(t, &CommandError{Command: "UID SEARCH", Status: "BAD", Code: "CLIENTBUG"}, cmd)
	require.Equal(t, wcmd.Error()+" [MailboxCommandRefused]", cmd.Error())
	require.Equal(t, "*imapx.CommandError", fmt.Sprintf("%T", cmd))
	require.False(t, IsTransient(cmd))

	for _, cause := range []error{wire.ErrMalformedResponse, wire.ErrTimedOut, wire.ErrServerBye, wire.ErrConnectionUnusable} {
		wtr := &wire.TransportError{Op: "UID FETCH", Err: cause}
		tr := fromWire(wtr)
		require.Equal(t, &TransportError{Op: "UID FETCH", Err: cause}, tr)
		require.Equal(t, wtr.Error()+" [MailboxConnectionLost]", tr.Error())
		require.Equal(t, "*imapx.TransportError", fmt.Sprintf("%T", tr))
		require.ErrorIs(t, tr, cause)
		require.True(t, IsTransient(tr))
	}

	for _, err := range []error{ErrNoFolder, fmt.Errorf("imapx: EXAMINE: %w", context.Canceled)} {
		require.Same(t, err, fromWire(err))
	}
}

// TestTextsEndWithIdentity: every failure of the adapter says its identity
// in brackets at the end of its text, which is what River UI and the log
// show an operator.
func TestTextsEndWithIdentity(t *testing.T) {
	for _, err := range []interface {
		error
		Identity() string
	}{
		&CommandError{Command: "EXAMINE", Status: "NO", Code: "NONEXISTENT"},
		&TransportError{Op: "UID FETCH", Err: io.EOF},
		&TLSError{Err: errors.New("x509")},
		&TLSError{Err: errInsecureSkipVerify},
		&AuthenticationError{Mechanism: "PLAIN", Code: "AUTHENTICATIONFAILED"},
		&AuthenticationExchangeError{Mechanism: "SCRAM-SHA-256", Err: errors.New("x")},
		&TokenError{Err: errors.New("refused")},
		&ThrottledError{Reason: "LIMIT", Err: &CommandError{Command: "LOGIN", Status: "NO"}},
		&PlacementUnknownError{Command: "UID MOVE", cause: io.EOF},
	} {
		require.True(t, strings.HasSuffix(err.Error(), " ["+err.Identity()+"]"), "%s", err.Error())
	}
}
