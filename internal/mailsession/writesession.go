package mailsession

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// WriteOpener opens one write connection of the account accountKey:
// imapx.OpenWriteConnection with the account's endpoint, its secrets
// resolved afresh, and the deployment's session options. It is the only
// way to a WriteSession, and only the mutation path is given one
// (internal/architecture holds every other package to that).
type WriteOpener func(ctx context.Context, accountKey string) (*imapx.WriteConnection, error)

// DefaultWriteCheckAfter is WriteSessionConfig.CheckAfter's default.
const DefaultWriteCheckAfter = 15 * time.Second

// WriteSessionConfig configures a WriteSession.
type WriteSessionConfig struct {
	// Registry runs establishment and commands under the account's
	// pipelines. Required.
	Registry *resilience.Registry
	// Account is the account key, the pipelines' instance. Required.
	Account string
	// Open opens a connection. Required.
	Open WriteOpener
	// CheckAfter is how long the connection may carry nothing before its
	// next use is preceded by NOOP, which finds a connection that went
	// away without a word. Default DefaultWriteCheckAfter (15 s).
	CheckAfter time.Duration
	// Logger receives the account key and counts only. Default: discard.
	Logger *slog.Logger
}

// WriteSession is an account's write connection whose commands run under
// the account's resilience pipelines, the writing counterpart of Session:
//
//   - The connection is opened on the first command, through Establish,
//     under MailboxSessionEstablishment.
//   - Before each use it is checked: one the server closed (go-imap's
//     reader saw it end) is replaced at once, and one that carried nothing
//     for CheckAfter must answer NOOP first or is replaced. A change is
//     therefore never handed a connection known to be gone.
//   - Commands run under MailboxDataRetrieval; an attempt after a failed
//     one runs on a fresh connection, since a failure that leaves the
//     connection in doubt kills it.
//
// What the caller sees is Session's: nil, its own cancellation, a terminal
// failure as itself, or a *MailboxUnavailableError.
//
// WriteSession adds no retry of its own and knows nothing of what a
// command means: a MOVE or COPY whose bytes were written must not be issued
// again in a later attempt, and keeping to that is the caller's (see
// Command). It is not safe for concurrent use; the mutation path lends it
// to one change at a time.
type WriteSession struct {
	cfg WriteSessionConfig
	w   *imapx.WriteConnection
}

// NewWriteSession validates cfg and fills its defaults. It opens nothing.
func NewWriteSession(cfg WriteSessionConfig) (*WriteSession, error) {
	if cfg.Registry == nil || cfg.Account == "" || cfg.Open == nil {
		return nil, errors.New("mailsession: a write session needs a registry, an account and an opener")
	}
	cfg.CheckAfter = cmp.Or(cfg.CheckAfter, DefaultWriteCheckAfter)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	return &WriteSession{cfg: cfg}, nil
}

// Command runs fn on the connection under the account's
// MailboxDataRetrieval pipeline, after selecting path (read-write) on it.
// fn gets the folder's UIDVALIDITY. Each attempt runs on a connection that
// passed its check (see WriteSession), so a connection the server closed
// between two changes costs the change nothing. A fn that issues a MOVE or
// COPY must not issue it again in a later attempt once its bytes were
// written (anything but an imapx.UnsentError), which the pipeline cannot
// know.
func (s *WriteSession) Command(ctx context.Context, path string, fn func(ctx context.Context, w *imapx.WriteConnection, uidValidity uint32) error) error {
	key := resilience.Key{Class: resilience.MailboxDataRetrieval, Instance: s.cfg.Account}
	err := s.cfg.Registry.Execute(ctx, key, resilience.OperationMailboxMutation, func(ctx context.Context) error {
		w, err := s.connection(ctx)
		if err != nil {
			return err
		}
		uv, err := w.Select(ctx, path)
		if err != nil {
			return err
		}
		return fn(ctx, w, uv)
	})
	return translate(ctx, s.cfg.Registry, resilience.MailboxDataRetrieval, s.cfg.Account, resilience.OperationMailboxMutation, err)
}

// connection returns a connection that can carry the next command: the one
// held, when it is still open and, after an idle stretch, answered NOOP,
// or else a fresh one opened under the establishment pipeline. Inside a
// retrieval attempt the establishment is a different class, so the two
// budgets do not multiply around one call, and what survives it arrives
// translated (a *MailboxUnavailableError, which the retrieval pipeline
// does not repeat).
func (s *WriteSession) connection(ctx context.Context) (*imapx.WriteConnection, error) {
	if w := s.w; w != nil {
		var reason string
		switch {
		case !w.Usable():
			reason = "closed"
		case w.IdleFor() >= s.cfg.CheckAfter:
			if err := w.Noop(ctx); err != nil {
				reason = "unanswered"
			}
		}
		if reason == "" {
			return w, nil
		}
		w.Abandon()
		s.w = nil
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.cfg.Logger.DebugContext(ctx, "write connection replaced before use",
			slog.String("account", s.cfg.Account), slog.String("reason", reason))
	}
	w, err := Establish(ctx, s.cfg.Registry, s.cfg.Account, resilience.OperationMailboxMutation,
		func(ctx context.Context) (*imapx.WriteConnection, error) { return s.cfg.Open(ctx, s.cfg.Account) },
		(*imapx.WriteConnection).Abandon)
	if err != nil {
		return nil, err
	}
	s.w = w
	s.cfg.Logger.DebugContext(ctx, "write connection opened", slog.String("account", s.cfg.Account))
	return w, nil
}

// Close ends the connection (LOGOUT on a healthy one, otherwise just the
// socket), if one is open. The session may open another afterwards.
func (s *WriteSession) Close() error {
	w := s.w
	s.w = nil
	if w == nil {
		return nil
	}
	return w.Close()
}
