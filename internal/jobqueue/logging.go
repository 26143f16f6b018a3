package jobqueue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

type loggerKey struct{}

// jobLogger is the logger of one job attempt; Annotate adds to it, so the
// lines every middleware writes after the worker returns carry what the
// worker said it works on.
type jobLogger struct {
	mu     sync.Mutex
	logger *slog.Logger
}

// Logger returns the logger the logging middleware attached to a job's
// context, already carrying the job's identity and whatever the worker
// added with Annotate, or def when ctx carries none (for example in a unit
// test calling a worker directly).
func Logger(ctx context.Context, def *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*jobLogger); ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.logger
	}
	return def
}

// WithLogger returns ctx with logger as its job's logger, for work done
// under one job on behalf of another — a carried job (carried.go): what
// runs with it annotates and logs as that job, and the carrier's own
// logger is left as it was.
func WithLogger(ctx context.Context, logger *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, &jobLogger{logger: logger})
}

// Annotate adds attrs — what the job works on, in deployment vocabulary
// such as an account id and a folder alias, never mail — to the job's
// logger for the rest of the attempt, and returns it (def, annotated, when
// ctx carries none).
func Annotate(ctx context.Context, def *slog.Logger, attrs ...any) *slog.Logger {
	l, ok := ctx.Value(loggerKey{}).(*jobLogger)
	if !ok {
		return def.With(attrs...)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logger = l.logger.With(attrs...)
	return l.logger
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
	jl := &jobLogger{logger: m.Logger.With(jobAttrs(job)...)}
	start := time.Now()
	err := doInner(context.WithValue(ctx, loggerKey{}, jl))
	logger := Logger(context.WithValue(ctx, loggerKey{}, jl), nil)
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
