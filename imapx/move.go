package imapx

import (
	"context"
	"errors"
	"fmt"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// Move relocates the message uid of the selected folder to dest with
// UID MOVE (RFC 6851 §3.1), which removes it from the source in the same
// command. It refuses with ErrNoSafeWay, sending nothing, when the server
// does not advertise MOVE: the composed relocation is the caller's (Copy,
// StoreFlags, ExpungeUID), never go-imap's fallback.
//
// A server with UIDPLUS answers with COPYUID (RFC 6851 §4.3); one without
// it names no placement and Placement is zero. A refused missing
// destination is ErrDestinationMissing, another refusal a *CommandError,
// a connection lost after the command's bytes were written and before its
// answer was read a *PlacementUnknownError (the command must not be issued
// again), and any failure before a byte of it was written an *UnsentError
// (it may be).
func (w *WriteConnection) Move(ctx context.Context, uid uint32, dest string) (Placement, error) {
	if err := w.selected(); err != nil {
		return Placement{}, err
	}
	if !w.CanMove() {
		return Placement{}, ErrNoSafeWay
	}
	var data *imapclient.MoveData
	err := w.run(ctx, "UID MOVE", func(c *imapclient.Client) error {
		// go-imap's Move asks its own view of the capabilities and,
		// without MOVE there, falls back to COPY, STORE and a plain
		// EXPUNGE, so that view is checked first. It is empty only when
		// the connection has ended (go-imap cannot ask any more): that
		// is a connection gone, never a server without MOVE.
		switch caps := c.Caps(); {
		case caps == nil:
			return errCapabilitiesUnknown
		case !caps.Has(imap.CapMove):
			return &callerError{ErrNoSafeWay}
		}
		var err error
		data, err = c.Move(imap.UIDSetNum(imap.UID(uid)), dest).Wait()
		return err
	})
	if err != nil {
		return Placement{}, placementError("UID MOVE", err)
	}
	return placementOf(uid, data.UIDValidity, data.DestUIDs), nil
}

// errCapabilitiesUnknown: go-imap could not say what the server
// advertises, because its reader has stopped.
var errCapabilitiesUnknown = fmt.Errorf("capabilities unknown: %w", wire.ErrConnectionEnded)

// placementError turns a placement command's failure into what the caller
// must act on.
func placementError(command string, err error) error {
	var (
		cmdErr *CommandError
		trErr  *TransportError
	)
	switch {
	case errors.As(err, &cmdErr) && cmdErr.Code == string(imap.ResponseCodeTryCreate):
		return ErrDestinationMissing
	case NotSent(err), errors.As(err, &cmdErr), errors.Is(err, ErrNoSafeWay), errors.Is(err, ErrNoFolder):
		return err
	case errors.As(err, &trErr):
		return &PlacementUnknownError{Command: command, cause: trErr.Err}
	}
	// The caller's context ended after the command was written: its
	// answer was never read either.
	return &PlacementUnknownError{Command: command, cause: err}
}

// placementOf reads the destination UID of src from a COPYUID answer.
func placementOf(src uint32, uidValidity uint32, dest imap.NumSet) Placement {
	if uidValidity == 0 || dest == nil {
		return Placement{}
	}
	set, ok := dest.(imap.UIDSet)
	if !ok {
		return Placement{}
	}
	uids, ok := set.Nums()
	if !ok || len(uids) != 1 || uids[0] == 0 {
		return Placement{}
	}
	return Placement{UIDValidity: uidValidity, UID: uint32(uids[0])}
}
