package imapx

import (
	"context"
	"fmt"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// ErrReconcileOnly is returned by ListFolders, SearchUIDs, FetchMetadata and
// FetchBodies of a session opened with OpenReconcileSession, before
// anything is sent: that session has no connection for them. It is
// terminal, a mistake of the caller's.
var ErrReconcileOnly = failure.New("MailboxSessionReconcileOnly", "imapx: a reconciliation session lists, searches and fetches nothing")

// OpenReconcileSession connects to ep and authenticates like
// OpenReadSession, but the session it returns has one connection of the
// wire layer's instead of go-imap's: ENABLE QRESYNC follows authentication
// when the server advertises QRESYNC, which go-imap's connection cannot
// have (it cannot read the VANISHED responses QRESYNC brings), and Examine
// opens the folder on that connection, read-only. It is the session for
// work that examines a folder and asks about its flags and existence and
// nothing else — Examine, ReconcileMode, Reconcile, ReconcileChanges,
// ExistingUIDs, Recover and Close behave as on a ReadSession — when no read
// session of the folder is at hand: its questions then take one command
// where a read session's take two (QResync mode rather than CondStore).
//
// It deliberately does not compress: reconciliation moves flags, not mail
// text. ListFolders, SearchUIDs, FetchMetadata and FetchBodies fail with
// ErrReconcileOnly. The connection sends only ENABLE, EXAMINE, UID FETCH of
// FLAGS, UID and MODSEQ, UID SEARCH and LOGOUT, so nothing can set \Seen or
// change a mailbox. Failures are those of OpenReadSession.
func OpenReconcileSession(ctx context.Context, ep Endpoint, opts SessionOptions) (*ReadSession, error) {
	s := &ReadSession{ep: ep, opts: opts, log: opts.logger(), reconcileOnly: true}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// connectReconcileOnly opens the only connection of a session opened with
// OpenReconcileSession.
func (s *ReadSession) connectReconcileOnly(ctx context.Context) error {
	w, err := s.reconcileConn(ctx)
	if err != nil {
		return err
	}
	s.caps = w.Caps()
	return nil
}

// examineReconcileOnly runs Examine's EXAMINE on the only connection of a
// session opened with OpenReconcileSession.
func (s *ReadSession) examineReconcileOnly(ctx context.Context, path string) (FolderState, error) {
	w, err := s.reconcileConn(ctx)
	if err != nil {
		return FolderState{}, err
	}
	st, err := w.Examine(ctx, s.opts.commandTimeout(), path, connMode(w) == CondStore)
	if err != nil {
		return FolderState{}, fromWire(err)
	}
	if st.UIDValidity == 0 {
		return FolderState{}, fmt.Errorf("imapx: EXAMINE reported no UIDVALIDITY: %w", ErrProtocolViolation)
	}
	return FolderState{Path: path, UIDValidity: st.UIDValidity, UIDNext: st.UIDNext, Exists: st.Exists, HighestModSeq: st.HighestModSeq}, nil
}
