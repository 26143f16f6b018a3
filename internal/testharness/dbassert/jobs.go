package dbassert

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
)

// Job is one of River's job rows as a test reads it.
type Job struct {
	ID          int64
	Kind, Queue string
	State       rivertype.JobState
	Attempt     int
	CreatedAt   time.Time
	ScheduledAt time.Time
	AttemptedAt *time.Time
	FinalizedAt *time.Time
	// Args and Metadata are the row's JSON as stored, Errors each recorded
	// attempt error's: what River UI shows of the job.
	Args     string
	Errors   []string
	Metadata string
	// CarriedBy is the job that carried this one (jobqueue.Carried), 0
	// for a job that ran on its own.
	CarriedBy int64
}

// LastError is the message of the job's latest recorded error, "" when it
// has none.
func (j Job) LastError() string {
	if len(j.Errors) == 0 {
		return ""
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(j.Errors[len(j.Errors)-1]), &e); err != nil {
		return j.Errors[len(j.Errors)-1]
	}
	return e.Error
}

// Text is the job's arguments, recorded errors and metadata as stored,
// one after another: everything of it anyone who opens River UI reads.
func (j Job) Text() string {
	return strings.Join(append(append([]string{j.Args}, j.Errors...), j.Metadata), " ")
}

// Arg is the job's argument name, decoded; nil when it has none.
func (j Job) Arg(name string) any {
	var args map[string]any
	if err := json.Unmarshal([]byte(j.Args), &args); err != nil {
		return nil
	}
	return args[name]
}

const jobColumns = `id, kind, queue, state::text, attempt, created_at, scheduled_at, attempted_at, finalized_at,
	args::text, coalesce(errors::text[], '{}'), coalesce(metadata::text, ''),
	coalesce((metadata->>'` + jobqueue.MetadataCarriedBy + `')::bigint, 0)`

func scanJob(row pgx.CollectableRow) (Job, error) {
	var j Job
	var state string
	err := row.Scan(&j.ID, &j.Kind, &j.Queue, &state, &j.Attempt, &j.CreatedAt, &j.ScheduledAt, &j.AttemptedAt, &j.FinalizedAt,
		&j.Args, &j.Errors, &j.Metadata, &j.CarriedBy)
	j.State = rivertype.JobState(state)
	return j, err
}

func readJobs(ctx context.Context, q Querier, sql string, args ...any) ([]Job, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanJob)
}

func jobs(tb testing.TB, q Querier, doing, sql string, args ...any) []Job {
	tb.Helper()
	out, err := readJobs(context.Background(), q, sql, args...)
	check(tb, err, doing)
	return out
}

// Jobs returns every job of kind, oldest first; kind "" returns every
// job of every kind.
func Jobs(tb testing.TB, q Querier, kind string) []Job {
	tb.Helper()
	out, err := ReadJobs(context.Background(), q, kind)
	check(tb, err, fmt.Sprintf("read the jobs of kind %q", kind))
	return out
}

// ReadJobs is Jobs for a caller that may not fail the test: it returns
// the error. Given states, it reads only the jobs in one of them.
func ReadJobs(ctx context.Context, q Querier, kind string, states ...rivertype.JobState) ([]Job, error) {
	return readJobs(ctx, q, `SELECT `+jobColumns+` FROM river_job
		WHERE ($1 = '' OR kind = $1) AND (cardinality($2::text[]) = 0 OR state::text = ANY($2)) ORDER BY id`,
		kind, stateNames(states))
}

// LastJob returns the newest job of kind, and fails the test when there
// is none.
func LastJob(tb testing.TB, q Querier, kind string) Job {
	tb.Helper()
	all := Jobs(tb, q, kind)
	if len(all) == 0 {
		tb.Fatalf("dbassert: no job of kind %q", kind)
	}
	return all[len(all)-1]
}

// JobCount counts the jobs of kind (of every kind when kind is "") in one
// of states, or in any state when none is given.
func JobCount(tb testing.TB, q Querier, kind string, states ...rivertype.JobState) int {
	tb.Helper()
	return count(tb, q, fmt.Sprintf("count the jobs of kind %q in %v", kind, states),
		`SELECT count(*) FROM river_job WHERE ($1 = '' OR kind = $1) AND (cardinality($2::text[]) = 0 OR state::text = ANY($2))`,
		kind, stateNames(states))
}

// JobsDueWithin returns the jobs that are running, available or pending,
// or scheduled or retryable to run before within has passed: the work a
// test that waits for quiet waits for.
func JobsDueWithin(tb testing.TB, q Querier, within time.Duration) []Job {
	tb.Helper()
	return jobs(tb, q, "read the jobs due", `
		SELECT `+jobColumns+` FROM river_job
		WHERE state IN ('available', 'running', 'pending')
		   OR (state IN ('scheduled', 'retryable') AND scheduled_at < now() + $1::interval)
		ORDER BY id`, within)
}

// MakeJobsDue makes every job of kind in one of states available now, as
// when its time comes, or as a restarted process's sweep hands back what
// its predecessor was running, and returns how many it moved.
func MakeJobsDue(tb testing.TB, q Querier, kind string, states ...rivertype.JobState) int64 {
	tb.Helper()
	return exec(tb, q, fmt.Sprintf("make the jobs of kind %q due", kind), `
		UPDATE river_job SET state = 'available', scheduled_at = now()
		WHERE kind = $1 AND state::text = ANY($2)`, kind, stateNames(states)).RowsAffected()
}

// CancelJobs cancels every job of kind in one of states, as an operator
// does in River UI, and returns how many it cancelled.
func CancelJobs(tb testing.TB, q Querier, kind string, states ...rivertype.JobState) int64 {
	tb.Helper()
	return exec(tb, q, fmt.Sprintf("cancel the jobs of kind %q", kind), `
		UPDATE river_job SET state = 'cancelled', finalized_at = now()
		WHERE kind = $1 AND state::text = ANY($2)`, kind, stateNames(states)).RowsAffected()
}

// MarkJobRunning makes job id running in its first attempt, as a worker
// that took it and has not finished leaves it.
func MarkJobRunning(tb testing.TB, q Querier, id int64) {
	tb.Helper()
	exec(tb, q, "mark a job running",
		`UPDATE river_job SET state = 'running', attempted_at = now(), attempt = 1 WHERE id = $1`, id)
}

// DelayAccountRun moves the scheduled account run to in from now,
// carrying failuresBefore failed runs in its arguments, as the run backoff
// schedules the run after failures.
func DelayAccountRun(tb testing.TB, q Querier, in time.Duration, failuresBefore int) {
	tb.Helper()
	exec(tb, q, "delay the account run", `
		UPDATE river_job SET scheduled_at = now() + $1::interval, args = args || jsonb_build_object('failures_before', $2::int)
		WHERE kind = 'account_run' AND state = 'scheduled'`, in, failuresBefore)
}

// InsertOrphanedJob inserts a job of kind, with empty arguments, that a
// process which died a minute ago was running, on a queue no worker
// takes, and returns its id.
func InsertOrphanedJob(tb testing.TB, q Querier, kind string) int64 {
	tb.Helper()
	var id int64
	check(tb, q.QueryRow(context.Background(), `
		INSERT INTO river_job (kind, args, queue, state, attempt, max_attempts, attempted_at, attempted_by, priority, scheduled_at)
		VALUES ($1, '{}', 'nobody', 'running', 1, 10, now() - interval '1 minute', ARRAY['a-process-that-died'], 1, now())
		RETURNING id`, kind).Scan(&id), fmt.Sprintf("insert an orphaned job of kind %q", kind))
	return id
}

func stateNames(states []rivertype.JobState) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}
