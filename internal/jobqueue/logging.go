package jobqueue

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

type loggerKey struct{}

// Logger returns the logger the logging middleware attached to a job's
// context, already carrying the job's identity, or def when ctx carries
// none (for example in a unit test calling a worker directly).
func Logger(ctx context.Context, def *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return def
}

// LoggingMiddleware logs the end of every job attempt with its kind, id,
// queue, attempt, duration and outcome, and hands the worker a logger that
// carries the same identity. It logs no job arguments: they are identifiers
// by design, but the guarantee that no mail content reaches a log should not
// depend on every future job type keeping to that.
type LoggingMiddleware struct {
	river.MiddlewareDefaults
	Logger *slog.Logger
}

var _ rivertype.WorkerMiddleware = (*LoggingMiddleware)(nil)

// Work implements rivertype.WorkerMiddleware.
func (m *LoggingMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	logger := m.Logger.With(jobAttrs(job)...)
	start := time.Now()
	err := doInner(context.WithValue(ctx, loggerKey{}, logger))
	attrs := []any{slog.Duration("duration", time.Since(start)), slog.String("outcome", Outcome(err))}
	if err == nil {
		logger.InfoContext(ctx, "job finished", attrs...)
	} else {
		logger.DebugContext(ctx, "job finished", attrs...)
	}
	return err
}

// Outcome names what a worker's return value asks River to do: completed,
// cancelled, snoozed or failed. Metrics and logs use it as a label.
func Outcome(err error) string {
	var cancel *rivertype.JobCancelError
	var snooze *rivertype.JobSnoozeError
	switch {
	case err == nil:
		return "completed"
	case errors.As(err, &cancel):
		return "cancelled"
	case errors.As(err, &snooze):
		return "snoozed"
	default:
		return "failed"
	}
}
