package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
)

// A carried job is a unit of work a running job inserted and runs itself,
// on the mailbox session it already holds, instead of leaving it to a
// worker that would log in again: an account run carries the folder pass
// it schedules, a folder pass the reconciliation window that follows it.
//
// The carried job is inserted pending — in the same transaction as the
// data it depends on, so the promise is durable — and names its carrier in
// its metadata (MetadataCarriedBy). No worker fetches a pending job. The
// carrier then either completes it (CompleteCarried), with the output a
// worker would have recorded, or hands it back to River as an ordinary job
// (ReleaseCarried): when it cannot run it now, or what it ran failed and
// the job's own attempts, backoff and failure handling should take over.
// A carrier that dies leaves its carried jobs pending; the orphan sweep
// (package liveness) releases every carried job whose carrier's liveness
// lock and process lock nobody holds, as it requeues a running job whose
// process died.
//
// River UI shows a carried job pending while its carrier has it in hand
// and completed once it ran, with carried_by naming the carrier.

// MetadataCarriedBy is the metadata key naming a carried job's carrier.
const MetadataCarriedBy = "carried_by"

// Carried returns the insert options of a job carried by the job
// carrierID: pending, with the carrier named in its metadata. The job's
// own insert options (queue, uniqueness, attempts) still apply.
func Carried(carrierID int64) *river.InsertOpts {
	return &river.InsertOpts{
		Pending:  true,
		Metadata: []byte(`{"` + MetadataCarriedBy + `":` + strconv.FormatInt(carrierID, 10) + `}`),
	}
}

// CompleteCarried marks the carried job id completed, as River marks a job
// whose worker returned nil, with output recorded where River keeps a
// worker's output (river.RecordOutput). It reports whether the job was
// still pending: false when the sweep or an operator released it
// meanwhile, which leaves it to River as it is.
func CompleteCarried(ctx context.Context, q interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, id int64, output any) (bool, error) {
	out, err := json.Marshal(output)
	if err != nil {
		return false, fmt.Errorf("jobqueue: encode a carried job's output: %w", err)
	}
	tag, err := q.Exec(ctx, `
		UPDATE river_job
		SET state = 'completed', attempt = attempt + 1, attempted_at = now(), finalized_at = now(),
		    metadata = metadata || jsonb_build_object('output', $2::jsonb)
		WHERE id = $1 AND state = 'pending'`, id, out)
	if err != nil {
		return false, fmt.Errorf("jobqueue: complete a carried job: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseCarried hands the carried jobs ids that are still pending back to
// River as ordinary jobs: available at once, or scheduled for at when at
// is later than now.
func ReleaseCarried(ctx context.Context, q interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, at time.Time, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `
		UPDATE river_job
		SET state = CASE WHEN $2::timestamptz > now() THEN 'scheduled'::river_job_state ELSE 'available'::river_job_state END,
		    scheduled_at = greatest($2::timestamptz, now())
		WHERE id = ANY($1) AND state = 'pending'`, ids, at)
	if err != nil {
		return fmt.Errorf("jobqueue: release carried jobs: %w", err)
	}
	return nil
}

// CancelCarried ends the carried job id as River ends a job whose worker
// returned river.JobCancel: cancelled, with text — the failure, named as
// it is for River UI — recorded as the attempt's error. It leaves a job
// that is no longer pending as it is.
func CancelCarried(ctx context.Context, q interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, id int64, text string) error {
	_, err := q.Exec(ctx, `
		UPDATE river_job
		SET state = 'cancelled', attempt = attempt + 1, attempted_at = now(), finalized_at = now(),
		    errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt + 1, 'error', $2::text, 'trace', ''))
		WHERE id = $1 AND state = 'pending'`, id, text)
	if err != nil {
		return fmt.Errorf("jobqueue: cancel a carried job: %w", err)
	}
	return nil
}
