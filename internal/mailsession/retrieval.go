package mailsession

import (
	"context"
	"time"

	"github.com/mailfathom/mailfathom/imapx"
)

// ListFolders lists the account's selectable folders (imapx LIST over every
// namespace) under the retrieval pipeline.
func (s *Session) ListFolders(ctx context.Context) ([]imapx.Folder, error) {
	var out []imapx.Folder
	err := s.retrieve(ctx, func(ctx context.Context, rs *imapx.ReadSession) error {
		var err error
		out, err = rs.ListFolders(ctx)
		return err
	})
	return out, err
}

// SearchUIDs is imapx UID SEARCH under the retrieval pipeline.
func (s *Session) SearchUIDs(ctx context.Context, after uint32, since time.Time) ([]uint32, error) {
	var out []uint32
	err := s.retrieve(ctx, func(ctx context.Context, rs *imapx.ReadSession) error {
		var err error
		out, err = rs.SearchUIDs(ctx, after, since)
		return err
	})
	return out, err
}

// FetchMetadata is the envelope FETCH under the retrieval pipeline.
func (s *Session) FetchMetadata(ctx context.Context, uids []uint32) ([]imapx.MessageMetadata, error) {
	var out []imapx.MessageMetadata
	err := s.retrieve(ctx, func(ctx context.Context, rs *imapx.ReadSession) error {
		var err error
		out, err = rs.FetchMetadata(ctx, uids)
		return err
	})
	return out, err
}

// IdentityScheme reports how the server names a message across folders;
// it sends nothing.
func (s *Session) IdentityScheme() imapx.IdentityScheme {
	return s.s.IdentityScheme()
}

// FetchIdentities is imapx's identity FETCH (X-GM-MSGID, EMAILID) under
// the retrieval pipeline (read-only; see
// imapx.ReadSession.FetchIdentities).
func (s *Session) FetchIdentities(ctx context.Context, uids []uint32) (map[uint32]imapx.MessageIdentity, error) {
	var out map[uint32]imapx.MessageIdentity
	err := s.retrieve(ctx, func(ctx context.Context, rs *imapx.ReadSession) error {
		var err error
		out, err = rs.FetchIdentities(ctx, uids)
		return err
	})
	return out, err
}

// FetchBodies streams the bodies of uids with BODY.PEEK[] under the
// retrieval pipeline, one message at a time, as imapx's FetchBodies does. An
// attempt after a failed one asks only for the UIDs fn has not yet accepted,
// so a connection cut half-way through a batch costs the messages after the
// cut, not the whole batch again, and fn sees each message at most once
// unless it failed on it.
//
// An error from fn ends the operation at once and is returned as is: it is
// the caller's, so the pipeline does not repeat it.
func (s *Session) FetchBodies(ctx context.Context, uids []uint32, maxBytes int64, fn func(imapx.Body) error) error {
	_, _, err := s.FetchBodiesThenMetadata(ctx, uids, maxBytes, fn, nil)
	return err
}

// FetchBodiesThenMetadata is FetchBodies of uids with the metadata of
// next asked for in the same flight (imapx's FetchBodiesThenMetadata),
// under the retrieval pipeline. An attempt after a failed one asks only
// for the bodies fn has not yet accepted, with next's metadata behind
// them. err is FetchBodies' error: when it is not nil the metadata was not
// read. When only the metadata failed after every body was delivered, it
// is asked for once more on its own, as FetchMetadata; metaErr is that
// failure.
func (s *Session) FetchBodiesThenMetadata(ctx context.Context, uids []uint32, maxBytes int64, fn func(imapx.Body) error, next []uint32) (meta []imapx.MessageMetadata, metaErr, err error) {
	accepted := make(map[uint32]bool, len(uids))
	var callerErr error
	err = s.retrieve(ctx, func(ctx context.Context, rs *imapx.ReadSession) error {
		remaining := make([]uint32, 0, len(uids)-len(accepted))
		for _, u := range uids {
			if !accepted[u] {
				remaining = append(remaining, u)
			}
		}
		var err error
		meta, metaErr, err = rs.FetchBodiesThenMetadata(ctx, remaining, maxBytes, func(b imapx.Body) error {
			if accepted[b.UID] {
				return nil
			}
			if err := fn(b); err != nil {
				callerErr = err
				return &callerFailure{err: err}
			}
			accepted[b.UID] = true
			return nil
		}, next)
		s.noteFailure(metaErr)
		return err
	})
	if callerErr != nil {
		return nil, nil, callerErr
	}
	if err != nil {
		return nil, nil, err
	}
	if metaErr != nil {
		meta, metaErr = s.FetchMetadata(ctx, next)
	}
	return meta, metaErr, nil
}

// callerFailure carries fn's error through the pipeline as a failure it does
// not repeat.
type callerFailure struct{ err error }

func (e *callerFailure) Error() string     { return e.err.Error() }
func (e *callerFailure) BudgetSpent() bool { return true }

// ReconcileMode reports which reconciliation path the server's capabilities
// select; it sends nothing.
func (s *Session) ReconcileMode() imapx.ReconcileMode {
	return s.s.ReconcileMode()
}

// Reconcile is imapx's flag and existence reconciliation of window under
// the retrieval pipeline (read-only; see imapx.ReadSession.Reconcile).
func (s *Session) Reconcile(ctx context.Context, window []uint32, sinceModSeq uint64) (imapx.ReconcileAnswer, error) {
	var out imapx.ReconcileAnswer
	err := s.retrieve(ctx, func(ctx context.Context, rs *imapx.ReadSession) error {
		var err error
		out, err = rs.Reconcile(ctx, window, sinceModSeq)
		return err
	})
	return out, err
}

// ReconcileChanges is imapx's question of what changed in the whole open
// folder since sinceModSeq, under the retrieval pipeline (read-only; see
// imapx.ReadSession.ReconcileChanges).
func (s *Session) ReconcileChanges(ctx context.Context, sinceModSeq uint64) (imapx.FolderChanges, error) {
	var out imapx.FolderChanges
	err := s.retrieve(ctx, func(ctx context.Context, rs *imapx.ReadSession) error {
		var err error
		out, err = rs.ReconcileChanges(ctx, sinceModSeq)
		return err
	})
	return out, err
}

// ExistingUIDs is imapx's identifier-only UID SEARCH over uids under the
// retrieval pipeline.
func (s *Session) ExistingUIDs(ctx context.Context, uids []uint32) ([]uint32, error) {
	var out []uint32
	err := s.retrieve(ctx, func(ctx context.Context, rs *imapx.ReadSession) error {
		var err error
		out, err = rs.ExistingUIDs(ctx, uids)
		return err
	})
	return out, err
}
