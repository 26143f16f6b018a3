package mailstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Push synchronization keeps two things per account and folder alias in
// folder_states: the mark a report leaves for a pass that is already
// running (change_reported_at), and the folder's effective mode, so that
// the line announcing a mode is written only when it changes.

// The effective modes of a folder.
const (
	ModePush    = "Push"
	ModePolling = "Polling"
)

// ReportChange records, in q, that the mail server reported a change in
// alias of accountKey at at. A pass that starts afterwards, or that is
// running and has not yet completed, takes it (TakeChangeReport) and reads
// the folder once more. An earlier report not yet taken keeps its time, so
// the latency measured from it is the longest.
func ReportChange(ctx context.Context, q Querier, accountKey, alias string, at time.Time) error {
	if _, err := q.Exec(ctx, `
		INSERT INTO folder_states AS s (account_key, alias, change_reported_at) VALUES ($1, $2, $3)
		ON CONFLICT (account_key, alias) DO UPDATE
		SET change_reported_at = coalesce(s.change_reported_at, excluded.change_reported_at)`,
		accountKey, alias, at); err != nil {
		return fmt.Errorf("mailstore: record a reported change: %w", err)
	}
	return nil
}

// TakeChangeReport clears the reported change of alias of accountKey and
// returns when it was reported, or ok false when none was waiting. A pass
// calls it as it starts, before it reads the folder, and again, in the
// transaction that completes it, to decide whether to go around once more.
func TakeChangeReport(ctx context.Context, q Querier, accountKey, alias string) (reportedAt time.Time, ok bool, err error) {
	err = q.QueryRow(ctx, `
		UPDATE folder_states s SET change_reported_at = NULL
		FROM (SELECT change_reported_at FROM folder_states
		      WHERE account_key = $1 AND alias = $2 AND change_reported_at IS NOT NULL FOR UPDATE) old
		WHERE s.account_key = $1 AND s.alias = $2
		RETURNING old.change_reported_at`, accountKey, alias).Scan(&reportedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("mailstore: take a reported change: %w", err)
	}
	return reportedAt, true, nil
}

// ChangeReported reports whether a change in alias of accountKey is
// waiting for its pass, without taking it.
func ChangeReported(ctx context.Context, q Querier, accountKey, alias string) (bool, error) {
	var reported bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM folder_states
		WHERE account_key = $1 AND alias = $2 AND change_reported_at IS NOT NULL)`, accountKey, alias).Scan(&reported)
	if err != nil {
		return false, fmt.Errorf("mailstore: look for a reported change: %w", err)
	}
	return reported, nil
}

// SetEffectiveMode records mode (ModePush or ModePolling) as how alias of
// accountKey is synchronized now, and reports whether that is a change.
func SetEffectiveMode(ctx context.Context, q Querier, accountKey, alias, mode string) (changed bool, err error) {
	tag, err := q.Exec(ctx, `
		INSERT INTO folder_states AS s (account_key, alias, effective_mode) VALUES ($1, $2, $3)
		ON CONFLICT (account_key, alias) DO UPDATE SET effective_mode = excluded.effective_mode
		WHERE s.effective_mode IS DISTINCT FROM excluded.effective_mode`, accountKey, alias, mode)
	if err != nil {
		return false, fmt.Errorf("mailstore: record a folder's effective mode: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}
