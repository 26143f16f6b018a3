package mailstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A server that throttles an account asks for a wait, not a repair: the
// account's work waits until the time the throttle records, on every
// replica, and the wait is no failed run (account_states is not touched).
// The rows live in account_throttles, with a count per reason in
// account_throttle_counts.

// Throttle is an account's row of account_throttles.
type Throttle struct {
	AccountKey string
	// Until is when the account's work may ask the server again.
	Until time.Time
	// Reason is the fixed word of the server's answer, such as
	// "BandwidthExceeded".
	Reason string
	// SuggestedDelay is the wait the server suggested; nil when it
	// suggested none.
	SuggestedDelay *time.Duration
	// Consecutive counts the throttling answers since the account last
	// completed a folder pass.
	Consecutive int
	// At is when the server last throttled the account.
	At time.Time
}

const throttleColumns = `account_key, throttled_until, reason, suggested_delay_ms, consecutive, throttled_at`

func scanThrottle(row pgx.Row) (Throttle, error) {
	var (
		th Throttle
		ms *int64
	)
	if err := row.Scan(&th.AccountKey, &th.Until, &th.Reason, &ms, &th.Consecutive, &th.At); err != nil {
		return th, err
	}
	if ms != nil {
		d := time.Duration(*ms) * time.Millisecond
		th.SuggestedDelay = &d
	}
	return th, nil
}

// RecordThrottle records, in tx, that accountKey's server throttled it at
// at for reason, suggesting the wait suggested (0: none), and counts it.
// wait is given the throttles in a row, this one included, and says how
// long the account waits; a throttle already recorded that reaches
// further is not shortened. It returns the throttle as it now stands.
func RecordThrottle(ctx context.Context, tx pgx.Tx, accountKey, reason string, suggested time.Duration, at time.Time, wait func(consecutive int) time.Duration) (Throttle, error) {
	prev, err := scanThrottle(tx.QueryRow(ctx, `SELECT `+throttleColumns+` FROM account_throttles
		WHERE account_key = $1 FOR UPDATE`, accountKey))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		prev = Throttle{}
	case err != nil:
		return Throttle{}, fmt.Errorf("mailstore: read the account's throttle: %w", err)
	}
	th := Throttle{AccountKey: accountKey, Reason: reason, Consecutive: prev.Consecutive + 1, At: at}
	th.Until = at.Add(wait(th.Consecutive))
	if prev.Until.After(th.Until) {
		th.Until = prev.Until
	}
	var ms *int64
	if suggested > 0 {
		th.SuggestedDelay = &suggested
		n := suggested.Milliseconds()
		ms = &n
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO account_throttles (`+throttleColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (account_key) DO UPDATE SET throttled_until = $2, reason = $3, suggested_delay_ms = $4,
			consecutive = $5, throttled_at = $6`,
		accountKey, th.Until, reason, ms, th.Consecutive, at); err != nil {
		return Throttle{}, fmt.Errorf("mailstore: record the account's throttle: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO account_throttle_counts AS c (account_key, reason, throttled) VALUES ($1, $2, 1)
		ON CONFLICT (account_key, reason) DO UPDATE SET throttled = c.throttled + 1`, accountKey, reason); err != nil {
		return Throttle{}, fmt.Errorf("mailstore: count the account's throttle: %w", err)
	}
	return th, nil
}

// ActiveThrottle returns accountKey's throttle when it still holds at now
// (Until after now), and false otherwise.
func ActiveThrottle(ctx context.Context, q Querier, accountKey string, now time.Time) (Throttle, bool, error) {
	th, err := scanThrottle(q.QueryRow(ctx, `SELECT `+throttleColumns+` FROM account_throttles
		WHERE account_key = $1 AND throttled_until > $2`, accountKey, now))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Throttle{}, false, nil
	case err != nil:
		return Throttle{}, false, fmt.Errorf("mailstore: read the account's throttle: %w", err)
	}
	return th, true, nil
}

// ResetThrottles forgets how many throttles in a row accountKey had, once
// it has completed work again; the last throttle stays for status to show.
func ResetThrottles(ctx context.Context, q Querier, accountKey string) error {
	if _, err := q.Exec(ctx, `UPDATE account_throttles SET consecutive = 0
		WHERE account_key = $1 AND consecutive > 0`, accountKey); err != nil {
		return fmt.Errorf("mailstore: reset the account's throttles: %w", err)
	}
	return nil
}

// Throttles returns every account's last throttle.
func Throttles(ctx context.Context, q Querier) ([]Throttle, error) {
	rows, err := q.Query(ctx, `SELECT `+throttleColumns+` FROM account_throttles ORDER BY account_key`)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the throttles: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Throttle, error) { return scanThrottle(r) })
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the throttles: %w", err)
	}
	return out, nil
}

// ThrottleCount is how often an account was throttled for one reason.
type ThrottleCount struct {
	AccountKey, Reason string
	Count              int64
}

// ThrottleCounts returns every account's throttle counts by reason.
func ThrottleCounts(ctx context.Context, q Querier) ([]ThrottleCount, error) {
	rows, err := q.Query(ctx, `SELECT account_key, reason, throttled FROM account_throttle_counts ORDER BY account_key, reason`)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the throttle counts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ThrottleCount, error) {
		var c ThrottleCount
		return c, r.Scan(&c.AccountKey, &c.Reason, &c.Count)
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the throttle counts: %w", err)
	}
	return out, nil
}
