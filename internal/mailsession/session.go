// Package mailsession is where an account's IMAP sessions are opened,
// retried and classified: the read-only Session the workers use — an
// imapx.ReadSession whose every call runs under the account's outbound
// resilience pipelines (see package resilience) — and the mutation path's
// WriteSession, both opened through Establish, the one establishment step
// for a session of any kind.
//
//   - Establishment — connecting, negotiating TLS, authenticating and
//     opening the folder read-only (EXAMINE) — runs under
//     MailboxSessionEstablishment keyed by the account. Only a
//     transport-level failure is repeated; a rejected credential, an
//     authentication exchange the client broke off, a refused certificate
//     or mechanism and a refused command are terminal, so a wrong password
//     is tried once.
//   - Retrieval — LIST, UID SEARCH, the envelope FETCH, the BODY.PEEK[]
//     stream and the reconciliation reads — runs under MailboxDataRetrieval
//     keyed by the account. An attempt that follows a failed one
//     re-establishes the session first (a fresh connection, freshly
//     resolved secrets, the folder re-examined read-only), because nothing
//     in a failure says the old command stream is still synchronized.
//
// What the caller sees: nil; the caller's own cancellation, untranslated;
// a terminal failure as itself (a rejected credential is the operator's to
// see); a server that throttles as the *imapx.ThrottledError it is, asked
// once; and a *MailboxUnavailableError for a limit the pipeline imposed or
// a transient failure that survived every attempt.
//
// The package adds no retry of its own: the attempts are the pipelines'.
// Session deliberately has no operation that could change a mailbox; it
// wraps imapx.ReadSession, which has none either. A WriteSession is a type
// of its own, reachable only with a WriteOpener, which only the mutation
// path is given: nothing that holds a Session can reach one.
package mailsession

import (
	"context"
	"errors"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// Opener opens a read-only session to an endpoint; imapx.OpenReadSession
// with the deployment's session options.
type Opener func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error)

// Session is a read-only IMAP session of one account whose calls run under
// the account's resilience pipelines. It is not safe for concurrent use.
type Session struct {
	registry  *resilience.Registry
	instance  string
	operation string
	ep        imapx.Endpoint
	open      Opener

	s *imapx.ReadSession
	// stale is set when a call failed in a way that leaves the connection
	// in doubt; the next retrieval re-establishes it first.
	stale      bool
	recoveries int
}

// Open establishes a session to ep under the MailboxSessionEstablishment
// pipeline of instance (the account key). operation names the work in the
// pipeline's logs and metrics — the folder alias, or
// resilience.OperationFolderDiscovery — and is never taken from mail.
func Open(ctx context.Context, registry *resilience.Registry, instance, operation string, ep imapx.Endpoint, open Opener) (*Session, error) {
	if registry == nil || open == nil || instance == "" || operation == "" {
		return nil, errors.New("mailsession: a registry, an opener, an instance and an operation are required")
	}
	s := &Session{registry: registry, instance: instance, operation: operation, ep: ep, open: open}
	rs, err := Establish(ctx, registry, instance, operation, func(ctx context.Context) (*imapx.ReadSession, error) {
		return open(ctx, ep)
	}, (*imapx.ReadSession).Abandon)
	if err != nil {
		return nil, err
	}
	s.s = rs
	return s, nil
}

// Work names the work the session does from now on in the pipelines' logs
// and metrics, as Open's operation did: a session a unit hands on to the
// next unit of the same account (the listing to a folder's pass) names
// that unit's folder alias. It changes nothing on the connection.
func (s *Session) Work(operation string) {
	if operation != "" {
		s.operation = operation
	}
}

// Compression is what the session's current connection decided about
// COMPRESS=DEFLATE, and why (imapx.ReadSession.Compression).
func (s *Session) Compression() imapx.Compression { return s.s.Compression() }

// Recoveries is how many times the session was re-established after a
// failed attempt.
func (s *Session) Recoveries() int { return s.recoveries }

// Examine opens path read-only (EXAMINE) under the establishment pipeline.
// A failure that leaves the connection in doubt is recovered by
// reconnecting within the same pipeline.
func (s *Session) Examine(ctx context.Context, path string) (imapx.FolderState, error) {
	var st imapx.FolderState
	err := s.establish(ctx, func(ctx context.Context) error {
		if err := s.recoverIfNeeded(ctx); err != nil {
			return err
		}
		var err error
		st, err = s.s.Examine(ctx, path)
		s.noteFailure(err)
		return err
	})
	return st, err
}

// Close ends the session (LOGOUT on a healthy connection, otherwise just the
// socket). Its failure is only its own and never replaces a failure the
// caller already has.
func (s *Session) Close() error {
	if s.s == nil {
		return nil
	}
	return s.s.Close()
}

// establish runs fn under the establishment pipeline and translates what
// survives it.
func (s *Session) establish(ctx context.Context, fn func(ctx context.Context) error) error {
	key := resilience.Key{Class: resilience.MailboxSessionEstablishment, Instance: s.instance}
	return s.translate(ctx, resilience.MailboxSessionEstablishment, s.registry.Execute(ctx, key, s.operation, fn))
}

// retrieve runs fn under the retrieval pipeline. An attempt after a failed
// one, or after a call that left the connection in doubt, re-establishes
// the session first.
func (s *Session) retrieve(ctx context.Context, fn func(ctx context.Context, rs *imapx.ReadSession) error) error {
	key := resilience.Key{Class: resilience.MailboxDataRetrieval, Instance: s.instance}
	err := s.registry.Execute(ctx, key, s.operation, func(ctx context.Context) error {
		if resilience.Attempt(ctx) > 1 {
			s.stale = true
		}
		if err := s.recoverIfNeeded(ctx); err != nil {
			return err
		}
		err := fn(ctx, s.s)
		s.noteFailure(err)
		return err
	})
	return s.translate(ctx, resilience.MailboxDataRetrieval, err)
}

// noteFailure marks the connection stale after a failure that may have left
// it unusable or desynchronized: anything but a terminal answer of the
// server on a connection that is still in step.
func (s *Session) noteFailure(err error) {
	if err == nil {
		return
	}
	var (
		cmdErr    *imapx.CommandError
		callerErr *callerFailure
	)
	if errors.As(err, &cmdErr) || errors.As(err, &callerErr) || errors.Is(err, imapx.ErrMailboxFolderRecreated) || errors.Is(err, imapx.ErrNoFolder) {
		return
	}
	s.stale = true
}

// recoverIfNeeded re-establishes a stale session: the old connection is
// closed without LOGOUT, a new one is opened with freshly resolved secrets,
// and the folder that was open is examined again, read-only. Inside a
// retrieval attempt it runs under the establishment pipeline (a different
// class, so the two budgets do not multiply around one call); inside an
// establishment attempt it runs as part of that attempt.
func (s *Session) recoverIfNeeded(ctx context.Context) error {
	if !s.stale && s.s != nil {
		return nil
	}
	recoverOnce := func(ctx context.Context) error {
		if s.s == nil {
			rs, err := s.open(ctx, s.ep)
			if err != nil {
				return err
			}
			s.s = rs
		} else if _, err := s.s.Recover(ctx); err != nil {
			// ErrMailboxFolderRecreated among them: the folder now
			// answering is not the one the work started on, and the
			// session refuses to read it.
			return err
		}
		s.stale = false
		s.recoveries++
		return nil
	}
	if resilience.InFlight(ctx, resilience.MailboxSessionEstablishment) {
		return recoverOnce(ctx)
	}
	// What survives the establishment pipeline here is translated at once,
	// so a transient failure that exhausted establishment's attempts reaches
	// the retrieval pipeline as MailboxUnavailable, which it does not
	// repeat: the connection was retried at one layer only.
	return s.establish(ctx, recoverOnce)
}

// translate maps what survived a pipeline of class onto the session's
// contract (see the package-level translate).
func (s *Session) translate(ctx context.Context, class resilience.DependencyClass, err error) error {
	return translate(ctx, s.registry, class, s.instance, s.operation, err)
}
