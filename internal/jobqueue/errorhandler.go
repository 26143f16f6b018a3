package jobqueue

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// ErrorHandler logs every failed job attempt and cancels jobs that panicked.
//
// A panic is a defect, not a dependency declining work: repeating it on
// River's schedule would only repeat the defect, so the job is cancelled and
// stays visible in River UI with its trace. A returned error is left to
// River's retry schedule; workers return river.JobCancel for a failure that
// must not be repeated. The log line carries the job's kind, id, queue and
// attempt and the error's type, and neither the job's arguments nor the
// panic value, which could hold anything.
type ErrorHandler struct {
	Logger *slog.Logger
}

var _ river.ErrorHandler = (*ErrorHandler)(nil)

// HandleError implements river.ErrorHandler.
func (h *ErrorHandler) HandleError(ctx context.Context, job *rivertype.JobRow, err error) *river.ErrorHandlerResult {
	level := slog.LevelWarn
	msg := "job attempt failed; River will retry it"
	if job.Attempt >= job.MaxAttempts {
		level = slog.LevelError
		msg = "job failed its last attempt and is discarded"
	}
	h.Logger.Log(ctx, level, msg, append(jobAttrs(job),
		slog.String("error_type", failure.Name(err)),
		slog.String("error", err.Error()))...)
	return nil
}

// HandlePanic implements river.ErrorHandler.
func (h *ErrorHandler) HandlePanic(ctx context.Context, job *rivertype.JobRow, panicVal any, trace string) *river.ErrorHandlerResult {
	h.Logger.ErrorContext(ctx, "job panicked; cancelled rather than retried",
		append(jobAttrs(job),
			slog.String("panic_type", fmt.Sprint(reflect.TypeOf(panicVal))),
			slog.String("trace", trace))...)
	return &river.ErrorHandlerResult{SetCancelled: true}
}

func jobAttrs(job *rivertype.JobRow) []any {
	return []any{
		slog.Int64("job_id", job.ID),
		slog.String("job_kind", job.Kind),
		slog.String("queue", job.Queue),
		slog.Int("attempt", job.Attempt),
		slog.Int("max_attempts", job.MaxAttempts),
	}
}
