package imapx

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// TestFromWire: the reconciliation connection's errors reach callers as
// this package's types, with the same text and cause; the Go type is what
// failure reports name, so it must be imapx's.
func TestFromWire(t *testing.T) {
	require.NoError(t, fromWire(nil))

	wcmd := &wire.CommandError{Command: "UID SEARCH", Status: "BAD", Code: "CLIENTBUG"}
	cmd := fromWire(wcmd)
	require.Equal(t, &CommandError{Command: "UID SEARCH", Status: "BAD", Code: "CLIENTBUG"}, cmd)
	require.Equal(t, wcmd.Error(), cmd.Error())
	require.Equal(t, "*imapx.CommandError", fmt.Sprintf("%T", cmd))
	require.False(t, IsTransient(cmd))

	for _, cause := range []error{wire.ErrMalformedResponse, wire.ErrTimedOut, wire.ErrServerBye, wire.ErrConnectionUnusable} {
		wtr := &wire.TransportError{Op: "UID FETCH", Err: cause}
		tr := fromWire(wtr)
		require.Equal(t, &TransportError{Op: "UID FETCH", Err: cause}, tr)
		require.Equal(t, wtr.Error(), tr.Error())
		require.Equal(t, "*imapx.TransportError", fmt.Sprintf("%T", tr))
		require.ErrorIs(t, tr, cause)
		require.True(t, IsTransient(tr))
	}

	for _, err := range []error{ErrNoFolder, fmt.Errorf("imapx: EXAMINE: %w", context.Canceled)} {
		require.Same(t, err, fromWire(err))
	}
}
