// Package liveness tells a running job whose process died from one that is
// still working, across every process sharing the database.
//
// River's open-source rescuer recognizes a stuck job only by age (an hour
// by default), so a folder pass whose process was killed would block its
// folder — folder passes are unique while running — for that long. Instead,
// liveness is held as session-level advisory locks, which PostgreSQL drops
// with the connection of a process that dies:
//
//   - every process holds a lock keyed by its River client id for its whole
//     life, taken before River starts, so every job it fetches is covered
//     from the moment River marks it running;
//   - every job holds a lock keyed by its id on the connection it works
//     with.
//
// Sweep finds running jobs whose own lock and whose process's lock nobody
// holds and hands them back to River as available, with an attempt error
// saying why, so the work resumes from its last commit within moments of a
// restart.
package liveness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// nsJob is the high 16 bits of a job's liveness key; see package slots for
// the other namespaces.
const (
	nsJob     = 0x6d06
	nsProcess = 0x6d07
	nsLeader  = 0x6d08
)

// leaderKey is the one key of the maintenance leadership.
const leaderKey = int64(nsLeader) << 48

func jobKey(id int64) int64 { return int64(uint64(nsJob)<<48 | uint64(id)&(1<<48-1)) }

// processKeySQL computes a process's key from its client id in SQL, so the
// holder and the sweep hash it identically.
const processKeySQL = `(%d::bigint << 48) | (hashtext(%s)::bigint & 281474976710655)`

// HoldProcess takes the liveness lock of the process whose River client id
// is clientID on conn, which the process keeps open for its whole life.
// Call it before starting River.
func HoldProcess(ctx context.Context, conn *pgxpool.Conn, clientID string) error {
	if clientID == "" {
		return errors.New("liveness: a process needs a client id")
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock("+fmt.Sprintf(processKeySQL, nsProcess, "$1")+")", clientID); err != nil {
		return fmt.Errorf("liveness: hold the process lock: %w", err)
	}
	return nil
}

// Hold takes the liveness lock of job id on conn, which the job keeps until
// Release.
func Hold(ctx context.Context, conn *pgxpool.Conn, id int64) error {
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", jobKey(id)); err != nil {
		return fmt.Errorf("liveness: hold: %w", err)
	}
	return nil
}

// Release gives the lock back.
func Release(ctx context.Context, conn *pgxpool.Conn, id int64) error {
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", jobKey(id)); err != nil {
		return fmt.Errorf("liveness: release: %w", err)
	}
	return nil
}

// Querier is what Sweep runs on.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Sweep returns to River, as available now, every running job of the given
// kinds that started more than grace ago and whose own liveness lock and
// whose process's lock (its last attempted_by client id) nobody holds, and
// every carried job of those kinds (pending, naming its carrier under
// carriedByKey in its metadata) inserted more than grace ago whose
// carrier's liveness lock nobody holds, or whose carrier is gone. A
// carrier inserts what it carries while it holds its lock, so its
// process's lock, which covers a running job until it takes its own, says
// nothing here: a carrier whose connection a database outage ended is
// still alive and can no longer complete or hand back what it carried.
// grace only absorbs clock differences between processes;
// liveness itself is decided by the locks. It returns the ids it requeued
// or released.
func Sweep(ctx context.Context, q Querier, kinds []string, carriedByKey string, grace time.Duration) ([]int64, error) {
	if len(kinds) == 0 {
		return nil, errors.New("liveness: no kinds to sweep")
	}
	held := func(key string) string {
		return `EXISTS (
				SELECT 1 FROM pg_locks l
				WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
				  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
				  AND ((l.classid::bigint << 32) | l.objid::bigint) = ` + key + `)`
	}
	processKey := fmt.Sprintf(processKeySQL, nsProcess, "j.attempted_by[array_length(j.attempted_by, 1)]")
	rows, err := q.Query(ctx, `
		WITH orphans AS (
			SELECT j.id FROM river_job j
			WHERE j.state = 'running' AND j.kind = ANY($1)
			  AND j.attempted_at < now() - make_interval(secs => $2)
			  AND NOT `+held(`($3::bigint << 48) | j.id`)+`
			  AND (coalesce(array_length(j.attempted_by, 1), 0) = 0 OR NOT `+held(processKey)+`)
			FOR UPDATE OF j SKIP LOCKED
		),
		abandoned AS (
			SELECT j.id FROM river_job j
			LEFT JOIN river_job c ON c.id = (j.metadata->>$4)::bigint
			WHERE j.state = 'pending' AND j.kind = ANY($1) AND j.metadata ? $4
			  AND j.created_at < now() - make_interval(secs => $2)
			  AND (c.id IS NULL OR NOT `+held(`($3::bigint << 48) | c.id`)+`)
			FOR UPDATE OF j SKIP LOCKED
		),
		requeued AS (
			UPDATE river_job j
			SET state = 'available',
			    scheduled_at = now(),
			    errors = array_append(j.errors, jsonb_build_object(
			        'at', now(), 'attempt', j.attempt,
			        'error', 'the process working this job stopped (its liveness lock was gone); requeued',
			        'trace', ''))
			FROM orphans o
			WHERE j.id = o.id AND j.state = 'running'
			RETURNING j.id
		),
		released AS (
			UPDATE river_job j
			SET state = 'available', scheduled_at = now()
			FROM abandoned a
			WHERE j.id = a.id AND j.state = 'pending'
			RETURNING j.id
		)
		SELECT id FROM requeued UNION ALL SELECT id FROM released`, kinds, grace.Seconds(), nsJob, carriedByKey)
	if err != nil {
		return nil, fmt.Errorf("liveness: sweep: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("liveness: sweep: %w", err)
	}
	return ids, nil
}
