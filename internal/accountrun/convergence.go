package accountrun

import (
	"context"
	"errors"
	"log/slog"

	"github.com/google/uuid"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
)

// Stepper carries one mailbox mutation a stage forward; *mutation.Stages
// implements it. The run steps with resume set, since it takes in hand a
// mutation whose own stage job may have been lost, and that counts an
// attempt. A mutation another unit carries answers mutation.ErrBusy.
type Stepper interface {
	Step(ctx context.Context, id uuid.UUID, resume bool) (mailstore.Mutation, error)
}

// Convergence is what a run did to the account's unfinished mailbox
// mutations, in counts.
type Convergence struct {
	// Taken counts the unfinished mutations the run took, oldest first, at
	// most Options.MaxMutations.
	Taken int `json:"taken"`
	// Finished counts those that reached a final state.
	Finished int `json:"finished"`
	// Failed counts those whose stage failed; any makes the run a failed
	// one.
	Failed int `json:"failed"`
}

// converge carries every unfinished mutation of the account one stage
// forward, oldest first, at most opts.MaxMutations of them, before the run
// touches a folder: a lost job, a failed stage or a placement whose answer
// never came is picked up here. A mutation that fails fails the account's
// run, recorded here, and the run goes on; the Convergence says so, so the
// run schedules the next on the backoff. A mutation another unit is
// carrying (mutation.ErrBusy) is left to it and not counted as finished or
// failed.
func converge(ctx context.Context, db DB, opts Options, accountKey string, logger *slog.Logger) (Convergence, error) {
	var c Convergence
	ids, err := mailstore.UnfinishedMutations(ctx, db, accountKey, opts.MaxMutations)
	if err != nil || len(ids) == 0 {
		return c, err
	}
	c.Taken = len(ids)
	var first error
	for _, id := range ids {
		m, err := opts.Stages.Step(ctx, id, true)
		switch {
		case errors.Is(err, mutation.ErrBusy):
			continue
		case ctx.Err() != nil:
			return Convergence{}, ctx.Err()
		case err != nil:
			c.Failed++
			if first == nil {
				first = err
			}
			continue
		}
		if m.State.Final() {
			c.Finished++
		}
	}
	logger.InfoContext(ctx, "unfinished mailbox mutations converged",
		slog.Int("taken", c.Taken), slog.Int("finished", c.Finished), slog.Int("failed", c.Failed))
	if first == nil {
		return c, nil
	}
	identity := failure.Name(first)
	logger.WarnContext(ctx, "a mailbox mutation failed; the account's run counts as failed and its next run follows the backoff",
		slog.String("failure", identity))
	return c, mailstore.FailRun(context.WithoutCancel(ctx), db, accountKey, identity, opts.Now())
}
