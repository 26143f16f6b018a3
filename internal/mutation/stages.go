package mutation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/slots"
)

// StagesConfig configures Stages.
type StagesConfig struct {
	// Pool is the application database. Required.
	Pool *pgxpool.Pool
	// Connections lends each account's write connection. Required.
	Connections *Connections
	// Next inserts, in tx, the job that carries m on from the stage it is
	// at now. It is called in the transaction of every advance that leaves
	// m unfinished, not waiting on an unknown outcome and not refused (a
	// refused placement waits for the account's next run). Required.
	Next func(ctx context.Context, tx pgx.Tx, m mailstore.Mutation) error
	// MaxAttempts is MaxMutationAttempts. Default 5.
	MaxAttempts int
	// UnknownOutcomeGrace is UnknownMutationOutcomeGrace. Default 6 h.
	UnknownOutcomeGrace time.Duration
	// Disposition is the account's RemotelyDeletedEmailDisposition, which
	// a completed delete applies to the local copy. Default: always
	// RetainTombstone.
	Disposition func(accountKey string) mailstore.Disposition
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives ids, kinds, stages and codes only. Default: discard.
	Logger *slog.Logger
}

// Stages carries mailbox mutations one stage at a time.
type Stages struct {
	cfg StagesConfig
}

// NewStages validates cfg and fills its defaults.
func NewStages(cfg StagesConfig) (*Stages, error) {
	if cfg.Pool == nil || cfg.Connections == nil || cfg.Next == nil {
		return nil, errors.New("mutation: the mutation stages need a pool, the write connections and a next-stage scheduler")
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.UnknownOutcomeGrace <= 0 {
		cfg.UnknownOutcomeGrace = 6 * time.Hour
	}
	if cfg.Disposition == nil {
		cfg.Disposition = func(string) mailstore.Disposition { return mailstore.RetainTombstone }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Stages{cfg: cfg}, nil
}

// ErrBusy reports that another worker carries the mutation, or another
// process holds the account's write connection: a deferral.
var ErrBusy = slots.ErrFull

// errSourceGone: the source occurrence no longer exists where the record
// says (its folder was recreated, or its binding is gone).
var errSourceGone = failure.New("MailboxMutationSourceGone", "mutation: the source occurrence no longer exists")

// StageFailedError is a stage that failed in a way a later attempt may
// not: its code is recorded and the mutation waits for the account's next
// run.
type StageFailedError struct {
	Mutation uuid.UUID
	Code     string
	Err      error
}

func (e *StageFailedError) Error() string {
	return fmt.Sprintf("mutation %s failed with code %s: %v", e.Mutation, e.Code, e.Err)
}

func (e *StageFailedError) Unwrap() error { return e.Err }

// Step carries mutation id one stage forward and returns it as it is
// afterwards. An attempt is counted (before anything is issued) when the
// mutation starts from the beginning and whenever resume is set — an
// account run taking an unfinished mutation in hand — but not for the
// stage job that continues an attempt whose previous stage succeeded. A mutation that is final, or not recorded, is returned as it
// is. It returns ErrBusy when another worker carries it or another process
// holds the account's write connection, and a *StageFailedError for a
// failure a later attempt may not meet (recorded; the account's next run
// tries again). A refusal every attempt would get (no safe way, a missing
// destination, a source that no longer exists) dead-letters the mutation
// and is not an error.
func (c *Stages) Step(ctx context.Context, id uuid.UUID, resume bool) (mailstore.Mutation, error) {
	conn, err := c.cfg.Pool.Acquire(ctx)
	if err != nil {
		return mailstore.Mutation{}, fmt.Errorf("mutation: acquire a connection: %w", err)
	}
	defer conn.Release()
	lock, err := slots.AcquireMutation(ctx, conn, id)
	if err != nil {
		return mailstore.Mutation{}, err
	}
	defer func() { _ = lock.Release(context.WithoutCancel(ctx)) }()

	m, found, err := mailstore.ReadMutation(ctx, c.cfg.Pool, id)
	if err != nil || !found || m.State.Final() {
		return m, err
	}
	if m.Stage == mailstore.StagePlacementIssued {
		return c.settle(ctx, m)
	}
	src, found, err := mailstore.ReadBindingByID(ctx, c.cfg.Pool, m.SourceFolderID)
	if err != nil {
		return m, err
	}
	var dest mailstore.Binding
	if found && m.Kind.Places() {
		dest, found, err = mailstore.ReadBindingByID(ctx, c.cfg.Pool, m.DestinationFolderID)
		if err != nil {
			return m, err
		}
	}
	if !found {
		return c.finish(ctx, m, mailstore.MutationDeadLettered, CodeSourceGone)
	}
	err = c.cfg.Connections.Use(ctx, m.AccountKey, func(s *Session) error {
		// Counted before the attempt, so one that kills the process
		// counts; after the connection was lent, so a deferral does not.
		if !resume && m.Stage != mailstore.StageRecorded && m.FailureCode == "" {
			return c.issue(ctx, s, &m, src, dest)
		}
		var decision mailstore.MutationAttempt
		err := pgx.BeginFunc(ctx, c.cfg.Pool, func(tx pgx.Tx) error {
			var err error
			m, decision, err = mailstore.BeginMutationAttempt(ctx, tx, m.ID, c.cfg.MaxAttempts, CodeAttemptsExhausted, c.cfg.Now())
			return err
		})
		if err != nil || decision != mailstore.AttemptGo {
			if decision == mailstore.AttemptExhausted {
				c.log(ctx, slog.LevelWarn, "mailbox mutation gave up: its attempts are spent", m)
			}
			return err
		}
		return c.issue(ctx, s, &m, src, dest)
	})
	if err != nil {
		return c.failed(ctx, m, err)
	}
	got, _, err := mailstore.ReadMutation(ctx, c.cfg.Pool, id)
	return got, err
}

// issue sends the command of m's stage and advances it.
func (c *Stages) issue(ctx context.Context, s *Session, m *mailstore.Mutation, src, dest mailstore.Binding) error {
	uid := m.SourceUID
	inSource := func(fn func(ctx context.Context, w *imapx.WriteConnection) error) error {
		return s.Command(ctx, src.RemotePath, func(ctx context.Context, w *imapx.WriteConnection, uv uint32) error {
			if uv != m.SourceUIDValidity {
				return errSourceGone
			}
			return fn(ctx, w)
		})
	}
	switch {
	case m.Kind == mailstore.MutationMarkRead || m.Kind == mailstore.MutationMarkUnread:
		err := inSource(func(ctx context.Context, w *imapx.WriteConnection) error {
			return w.StoreFlag(ctx, uid, `\Seen`, m.Kind == mailstore.MutationMarkRead)
		})
		if err != nil {
			return err
		}
		return c.advance(ctx, *m, mailstore.StageRecorded, mailstore.MutationAdvance{Stage: mailstore.StageCompleted})

	case m.Kind == mailstore.MutationDelete && m.Stage == mailstore.StageRecorded,
		m.Kind == mailstore.MutationRelocate && m.Stage == mailstore.StageCopied:
		err := inSource(func(ctx context.Context, w *imapx.WriteConnection) error {
			if !w.CanExpungeUID() {
				// Without UID EXPUNGE the flag could never be followed
				// by an expunge that spares the owner's \Deleted mail.
				return imapx.ErrNoSafeWay
			}
			return w.StoreFlag(ctx, uid, `\Deleted`, true)
		})
		if err != nil {
			return err
		}
		return c.advance(ctx, *m, m.Stage, mailstore.MutationAdvance{Stage: mailstore.StageFlagged})

	case m.Stage == mailstore.StageFlagged:
		kept := false
		err := inSource(func(ctx context.Context, w *imapx.WriteConnection) error {
			if err := w.ExpungeUID(ctx, uid); err != nil {
				return err
			}
			// UID EXPUNGE removes only a message that carries \Deleted and
			// answers OK whatever it removed: whether the message left is
			// asked, so a flag cleared since it was set (by another client,
			// or lost by the server) never reads as a completed change.
			held, err := w.Holds(ctx, uid)
			kept = held
			return err
		})
		if err != nil {
			return err
		}
		if kept {
			return c.rewind(ctx, *m)
		}
		return c.advance(ctx, *m, mailstore.StageFlagged, mailstore.MutationAdvance{Stage: mailstore.StageCompleted})

	case m.Kind.Places() && m.Stage == mailstore.StageRecorded:
		return c.place(ctx, s, m, src, dest)
	}
	return fmt.Errorf("mutation: %s at stage %s has nothing to issue", m.Kind, m.Stage)
}

// place issues the MOVE or COPY of a relocation or copy. The stage is
// recorded as PlacementIssued before the command goes out, and a command
// that may have reached the server is never sent twice: not by a later
// attempt of the pipeline, and not by a later Step, which finds the stage
// and settles it instead. One that failed before any of its bytes was
// written (imapx.NotSent) did not reach the server: its stage is put back
// to Recorded, and the pipeline's next attempt, on a fresh connection, or
// a later Step issues it again.
func (c *Stages) place(ctx context.Context, s *Session, m *mailstore.Mutation, src, dest mailstore.Binding) error {
	var (
		// issued: the record is at PlacementIssued. sent: the command may
		// have reached the server, so it is never issued again.
		issued, sent bool
		placeErr     error
		placed       imapx.Placement
		path         mailstore.PlacementPath
	)
	err := s.Command(ctx, src.RemotePath, func(ctx context.Context, w *imapx.WriteConnection, uv uint32) error {
		if sent {
			return placeErr
		}
		if uv != m.SourceUIDValidity {
			return errSourceGone
		}
		// A placement of a UID the folder no longer holds is answered OK,
		// like one that ran: whether it is there is asked first.
		held, err := w.Holds(ctx, m.SourceUID)
		if err != nil {
			return err
		}
		if !held {
			return errSourceGone
		}
		switch {
		case m.Kind == mailstore.MutationCopy:
			path = ""
		case w.CanMove():
			path = mailstore.PathMove
		case w.CanExpungeUID():
			path = mailstore.PathFallback
		default:
			return imapx.ErrNoSafeWay
		}
		if err := c.advance(ctx, *m, mailstore.StageRecorded, mailstore.MutationAdvance{Stage: mailstore.StagePlacementIssued, Path: path}); err != nil {
			return err
		}
		issued, sent = true, true
		if path == mailstore.PathMove {
			placed, placeErr = w.Move(ctx, m.SourceUID, dest.RemotePath)
		} else {
			placed, placeErr = w.Copy(ctx, m.SourceUID, dest.RemotePath)
		}
		switch {
		case placeErr == nil, refused(placeErr):
		case imapx.NotSent(placeErr):
			// Nothing of it left: the record goes back to Recorded, and
			// only then may it be issued again — by the pipeline's next
			// attempt, or through the account's run like any failure, so
			// no job is scheduled with it. A record that cannot be put
			// back keeps saying PlacementIssued and is settled, never
			// reissued.
			rerr := pgx.BeginFunc(context.WithoutCancel(ctx), c.cfg.Pool, func(tx pgx.Tx) error {
				return mailstore.AdvanceMutation(context.WithoutCancel(ctx), tx, m.ID, mailstore.StagePlacementIssued,
					mailstore.MutationAdvance{Stage: mailstore.StageRecorded}, c.cfg.Now())
			})
			if rerr != nil {
				placeErr = errors.Join(placeErr, rerr)
				return placeErr
			}
			issued, sent = false, false
		default:
			placeErr = unknownOutcome(placeErr)
		}
		return placeErr
	})
	if !issued {
		return err
	}
	m.Stage, m.Path = mailstore.StagePlacementIssued, path
	if placeErr != nil {
		if imapx.NotSent(placeErr) {
			// Not sent, and its record could not be put back (above).
			return placeErr
		}
		if refused(placeErr) {
			// The server answered: the placement did not run, and may be
			// issued again from the beginning.
			if rerr := c.advance(ctx, *m, mailstore.StagePlacementIssued, mailstore.MutationAdvance{Stage: mailstore.StageRecorded}); rerr != nil {
				return errors.Join(placeErr, rerr)
			}
			return placeErr
		}
		now := c.cfg.Now()
		if ferr := mailstore.FailMutation(context.WithoutCancel(ctx), c.cfg.Pool, m.ID, CodeUnknownOutcome, now); ferr != nil {
			return ferr
		}
		c.log(ctx, slog.LevelWarn, "mailbox mutation placement sent and its answer never read; it is not issued again", *m,
			slog.String("failure_code", CodeUnknownOutcome))
		return nil
	}
	next := mailstore.StageCompleted
	if path == mailstore.PathFallback {
		next = mailstore.StageCopied
	}
	return c.advance(ctx, *m, mailstore.StagePlacementIssued, mailstore.MutationAdvance{
		Stage: next, PlacedUIDValidity: placed.UIDValidity, PlacedUID: placed.UID,
	})
}

// settle decides a placement whose answer was never read, from what
// synchronization observed since, without issuing anything.
func (c *Stages) settle(ctx context.Context, m mailstore.Mutation) (mailstore.Mutation, error) {
	now := c.cfg.Now()
	switch {
	case m.Path == mailstore.PathMove && !m.SourceLeftAt.IsZero():
		// MOVE removes the source in the same command: the source leaving
		// says it ran.
		return c.finish(ctx, m, mailstore.MutationCompleted, "")
	case !m.PlacementObservedAt.IsZero() && m.Kind == mailstore.MutationCopy:
		return c.finish(ctx, m, mailstore.MutationCompleted, "")
	case !m.PlacementObservedAt.IsZero() && m.Path == mailstore.PathFallback:
		if err := c.advance(ctx, m, mailstore.StagePlacementIssued, mailstore.MutationAdvance{Stage: mailstore.StageCopied}); err != nil {
			return m, err
		}
	case !m.PlacementIssuedAt.IsZero() && now.Sub(m.PlacementIssuedAt) >= c.cfg.UnknownOutcomeGrace:
		c.log(ctx, slog.LevelWarn, "mailbox mutation given up on: its placement was never observed within the grace", m,
			slog.String("failure_code", CodeUnknownOutcome))
		return c.finish(ctx, m, mailstore.MutationDeadLettered, CodeUnknownOutcome)
	default:
		if err := mailstore.FailMutation(ctx, c.cfg.Pool, m.ID, CodeUnknownOutcome, now); err != nil {
			return m, err
		}
	}
	got, _, err := mailstore.ReadMutation(ctx, c.cfg.Pool, m.ID)
	return got, err
}

// advance moves m from stage from as a says, in one transaction with the
// next stage's job and, for a completed delete, with hiding the local
// copy. A placement the server refused goes back to StageRecorded with no
// job: like any failed stage it waits for the account's next run, and an
// account run converging it does not have a stage job try it again at
// once.
func (c *Stages) advance(ctx context.Context, m mailstore.Mutation, from mailstore.MutationStage, a mailstore.MutationAdvance) error {
	// The command ran: its record is written even if the caller's
	// context ends now.
	ctx = context.WithoutCancel(ctx)
	now := c.cfg.Now()
	err := pgx.BeginFunc(ctx, c.cfg.Pool, func(tx pgx.Tx) error {
		if err := mailstore.AdvanceMutation(ctx, tx, m.ID, from, a, now); err != nil {
			return err
		}
		if a.Stage == mailstore.StageCompleted && m.Kind == mailstore.MutationDelete {
			return mailstore.HideDeletedEmail(ctx, tx, m.EmailID, c.cfg.Disposition(m.AccountKey), now)
		}
		if a.Stage == mailstore.StageCompleted || a.Stage == mailstore.StagePlacementIssued ||
			(from == mailstore.StagePlacementIssued && a.Stage == mailstore.StageRecorded) {
			return nil
		}
		next := m
		next.Stage = a.Stage
		return c.cfg.Next(ctx, tx, next)
	})
	if err != nil {
		return err
	}
	m.Stage = a.Stage
	c.log(ctx, slog.LevelDebug, "mailbox mutation advanced", m, slog.String("path", string(a.Path)))
	return nil
}

// errFlagCleared: the expunge left the message in place, its \Deleted
// flag no longer set.
var errFlagCleared = failure.New("MailboxMutationFlagCleared",
	"mutation: the message was still there after the expunge: its \\Deleted flag had been cleared")

// rewind takes m, whose expunge left the message in place, back to the
// stage before its flag was set — Recorded for a delete, Copied for a
// relocation, whose copy is never repeated — with no job: like any failed
// stage it waits for the account's next run, which sets the flag again.
// It returns errFlagCleared.
func (c *Stages) rewind(ctx context.Context, m mailstore.Mutation) error {
	back := mailstore.StageRecorded
	if m.Kind == mailstore.MutationRelocate {
		back = mailstore.StageCopied
	}
	err := pgx.BeginFunc(context.WithoutCancel(ctx), c.cfg.Pool, func(tx pgx.Tx) error {
		return mailstore.AdvanceMutation(context.WithoutCancel(ctx), tx, m.ID, mailstore.StageFlagged,
			mailstore.MutationAdvance{Stage: back}, c.cfg.Now())
	})
	if err != nil {
		return errors.Join(errFlagCleared, err)
	}
	c.log(ctx, slog.LevelWarn, "the expunge left the message in place: its \\Deleted flag had been cleared; the account's next run sets it again", m)
	return errFlagCleared
}

// finish puts m in a final state.
func (c *Stages) finish(ctx context.Context, m mailstore.Mutation, state mailstore.MutationState, code string) (mailstore.Mutation, error) {
	err := pgx.BeginFunc(context.WithoutCancel(ctx), c.cfg.Pool, func(tx pgx.Tx) error {
		if err := mailstore.FinishMutation(ctx, tx, m.ID, state, code, c.cfg.Now()); err != nil {
			return err
		}
		if state == mailstore.MutationCompleted && m.Kind == mailstore.MutationDelete {
			return mailstore.HideDeletedEmail(ctx, tx, m.EmailID, c.cfg.Disposition(m.AccountKey), c.cfg.Now())
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	got, _, err := mailstore.ReadMutation(ctx, c.cfg.Pool, m.ID)
	return got, err
}

// failed records what a failed attempt means for m.
func (c *Stages) failed(ctx context.Context, m mailstore.Mutation, err error) (mailstore.Mutation, error) {
	if errors.Is(err, slots.ErrFull) || ctx.Err() != nil {
		return m, err
	}
	var code string
	switch {
	case errors.Is(err, imapx.ErrNoSafeWay):
		code = CodeNoSafeWay
	case errors.Is(err, imapx.ErrDestinationMissing):
		code = CodeDestinationMissing
	case errors.Is(err, errSourceGone), errors.Is(err, imapx.ErrMailboxFolderRecreated):
		code = CodeSourceGone
	}
	if code != "" {
		c.log(ctx, slog.LevelWarn, "mailbox mutation refused; every later attempt would be refused too, so it is given up on", m,
			slog.String("failure_code", code), slog.String("failure", failure.Name(err)))
		return c.finish(ctx, m, mailstore.MutationDeadLettered, code)
	}
	code = CodeMailboxUnavailable
	var cmdErr *imapx.CommandError
	switch {
	case errors.As(err, &cmdErr):
		code = CodeCommandRefused
	case errors.Is(err, errFlagCleared):
		code = CodeFlagCleared
	}
	if ferr := mailstore.FailMutation(context.WithoutCancel(ctx), c.cfg.Pool, m.ID, code, c.cfg.Now()); ferr != nil {
		return m, errors.Join(err, ferr)
	}
	return m, &StageFailedError{Mutation: m.ID, Code: code, Err: err}
}

func (c *Stages) log(ctx context.Context, level slog.Level, msg string, m mailstore.Mutation, attrs ...slog.Attr) {
	c.cfg.Logger.LogAttrs(ctx, level, msg, append([]slog.Attr{
		slog.String("account", m.AccountKey),
		slog.String("mutation", m.ID.String()),
		slog.String("kind", string(m.Kind)),
		slog.String("stage", string(m.Stage)),
		slog.String("email", m.EmailID.String()),
	}, attrs...)...)
}

// refused reports whether the server answered a placement with a refusal,
// so it did not run.
func refused(err error) bool {
	var cmdErr *imapx.CommandError
	return errors.As(err, &cmdErr) || errors.Is(err, imapx.ErrDestinationMissing) || errors.Is(err, imapx.ErrNoSafeWay)
}

// unknownOutcome makes any failure of a placement that may have reached
// the server — neither refused by it nor failed before a byte of it was
// written — an unknown outcome, which nothing retries.
func unknownOutcome(err error) error {
	var unknown *imapx.PlacementUnknownError
	if errors.As(err, &unknown) {
		return err
	}
	return &outcomeUnknown{err: err}
}

type outcomeUnknown struct{ err error }

func (e *outcomeUnknown) Error() string {
	return "mutation: the placement was sent and its answer never read"
}

func (e *outcomeUnknown) Identity() string { return "MailboxChangeOutcomeUnknown" }
