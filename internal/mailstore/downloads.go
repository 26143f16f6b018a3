package mailstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// An account's daily download budget is a rolling window over the
// message content its forward passes downloaded, kept in account_downloads
// per hour (UTC) and shared by every replica through the database. A pass
// claims its allowance before it downloads (ClaimDownload) and settles it
// when it ends (SettleDownload); claims of one account are made one at a
// time under its account_download_states row, so passes running at once
// never share out more than the budget.

// DownloadWindow is the span the daily download budget covers: the last
// 24 hours, rolling, not a calendar day, so no 24 hours ever see more than
// the budget whatever time of day a provider's own day begins.
const DownloadWindow = 24 * time.Hour

// downloadHour is the granularity of account_downloads. An hour's bytes
// count until DownloadWindow after the hour ends, so they count for at
// least DownloadWindow after they were downloaded and at most an hour
// longer.
const downloadHour = time.Hour

// hourOf is the account_downloads row t is recorded in.
func hourOf(t time.Time) time.Time { return t.UTC().Truncate(downloadHour) }

// windowAfter is the hour after which rows count at now: the window is
// every row whose hour is later.
func windowAfter(now time.Time) time.Time { return now.Add(-DownloadWindow - downloadHour) }

// DownloadClaim is an allowance a pass claimed: Bytes of content it may
// download, claimed at At.
type DownloadClaim struct {
	Bytes int64
	At    time.Time
}

// downloadHourBytes is one row of account_downloads.
type downloadHourBytes struct {
	hour  time.Time
	bytes int64
}

// ClaimDownload claims, in tx, an allowance for one pass of accountKey at
// now: what the window leaves of budget, but at most share (so passes of
// the account running at once each get a part). The claim counts at once;
// SettleDownload replaces it with what was downloaded. When the window
// leaves less than the account needs — the declared size of the message
// a pass last stopped before, or one byte — nothing is claimed, and
// resume is when enough of the window will have expired; the account's
// pause is recorded for status.
func ClaimDownload(ctx context.Context, tx pgx.Tx, accountKey string, budget, share int64, now time.Time) (claim DownloadClaim, resume time.Time, err error) {
	needed, err := lockDownloadState(ctx, tx, accountKey)
	if err != nil {
		return DownloadClaim{}, time.Time{}, err
	}
	hours, used, err := downloadWindow(ctx, tx, accountKey, now)
	if err != nil {
		return DownloadClaim{}, time.Time{}, err
	}
	need := max(needed, 1)
	if budget-used < need {
		resume = resumeAt(hours, used, budget, need, now)
		_, err := tx.Exec(ctx, `UPDATE account_download_states SET paused_until = $2 WHERE account_key = $1`, accountKey, resume)
		if err != nil {
			return DownloadClaim{}, time.Time{}, fmt.Errorf("mailstore: record the download pause: %w", err)
		}
		return DownloadClaim{At: now}, resume, nil
	}
	claim = DownloadClaim{Bytes: min(budget-used, max(share, need)), At: now}
	if err := addDownloaded(ctx, tx, accountKey, now, claim.Bytes); err != nil {
		return DownloadClaim{}, time.Time{}, err
	}
	if _, err := tx.Exec(ctx, `UPDATE account_download_states SET paused_until = NULL, needed_bytes = 0 WHERE account_key = $1`, accountKey); err != nil {
		return DownloadClaim{}, time.Time{}, fmt.Errorf("mailstore: record the download claim: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM account_downloads WHERE account_key = $1 AND hour <= $2`, accountKey, windowAfter(now)); err != nil {
		return DownloadClaim{}, time.Time{}, fmt.Errorf("mailstore: forget downloads outside the window: %w", err)
	}
	return claim, time.Time{}, nil
}

// SettleDownload replaces, in tx, claim of accountKey with the downloaded
// bytes the pass downloaded, counted at now. needed, when not 0, is the
// declared size of the first message the pass left for lack of
// allowance: if the window cannot hold it, the account pauses until it
// can, which SettleDownload returns (paused true); otherwise the pass may
// claim again at once.
func SettleDownload(ctx context.Context, tx pgx.Tx, accountKey string, claim DownloadClaim, downloaded, needed, budget int64, now time.Time) (resume time.Time, paused bool, err error) {
	if _, err := lockDownloadState(ctx, tx, accountKey); err != nil {
		return time.Time{}, false, err
	}
	if err := addDownloaded(ctx, tx, accountKey, claim.At, -claim.Bytes); err != nil {
		return time.Time{}, false, err
	}
	if err := addDownloaded(ctx, tx, accountKey, now, downloaded); err != nil {
		return time.Time{}, false, err
	}
	if needed <= 0 {
		return time.Time{}, false, nil
	}
	hours, used, err := downloadWindow(ctx, tx, accountKey, now)
	if err != nil {
		return time.Time{}, false, err
	}
	if budget-used >= needed {
		return time.Time{}, false, nil
	}
	resume = resumeAt(hours, used, budget, needed, now)
	if _, err := tx.Exec(ctx, `UPDATE account_download_states SET paused_until = $2, needed_bytes = $3 WHERE account_key = $1`,
		accountKey, resume, needed); err != nil {
		return time.Time{}, false, fmt.Errorf("mailstore: record the download pause: %w", err)
	}
	return resume, true, nil
}

// lockDownloadState locks accountKey's account_download_states row,
// creating it, and returns the bytes a paused account needs.
func lockDownloadState(ctx context.Context, tx pgx.Tx, accountKey string) (int64, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO account_download_states (account_key) VALUES ($1) ON CONFLICT DO NOTHING`, accountKey); err != nil {
		return 0, fmt.Errorf("mailstore: lock the download state: %w", err)
	}
	var needed int64
	if err := tx.QueryRow(ctx, `SELECT needed_bytes FROM account_download_states WHERE account_key = $1 FOR UPDATE`, accountKey).Scan(&needed); err != nil {
		return 0, fmt.Errorf("mailstore: lock the download state: %w", err)
	}
	return needed, nil
}

// addDownloaded adds n bytes (negative to take a claim back) to the hour
// of at.
func addDownloaded(ctx context.Context, q Querier, accountKey string, at time.Time, n int64) error {
	if n == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, `
		INSERT INTO account_downloads AS d (account_key, hour, bytes) VALUES ($1, $2, $3)
		ON CONFLICT (account_key, hour) DO UPDATE SET bytes = d.bytes + excluded.bytes`,
		accountKey, hourOf(at), n); err != nil {
		return fmt.Errorf("mailstore: record downloaded bytes: %w", err)
	}
	return nil
}

// downloadWindow returns accountKey's hours in the window at now, oldest
// first, and their sum.
func downloadWindow(ctx context.Context, q Querier, accountKey string, now time.Time) ([]downloadHourBytes, int64, error) {
	rows, err := q.Query(ctx, `SELECT hour, bytes FROM account_downloads WHERE account_key = $1 AND hour > $2 ORDER BY hour`,
		accountKey, windowAfter(now))
	if err != nil {
		return nil, 0, fmt.Errorf("mailstore: read the download window: %w", err)
	}
	hours, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (downloadHourBytes, error) {
		var h downloadHourBytes
		return h, r.Scan(&h.hour, &h.bytes)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("mailstore: read the download window: %w", err)
	}
	var used int64
	for _, h := range hours {
		used += h.bytes
	}
	return hours, used, nil
}

// resumeAt is the earliest time, not before now, at which the window of
// hours (oldest first, summing to used) has room under budget for need
// bytes, as its hours expire.
func resumeAt(hours []downloadHourBytes, used, budget, need int64, now time.Time) time.Time {
	at := now
	for _, h := range hours {
		if budget-used >= need {
			break
		}
		used -= h.bytes
		at = h.hour.Add(DownloadWindow + downloadHour)
	}
	if at.Before(now) {
		return now
	}
	return at
}

// DownloadState is what an account's budget stands at.
type DownloadState struct {
	AccountKey string
	// Used is what the window holds now.
	Used int64
	// PausedUntil is when a pass that stopped at the budget continues; nil
	// when none stopped, or the pause is over.
	PausedUntil *time.Time
}

// DownloadStates returns, for every account that downloaded within the
// window at now or is paused, what its budget stands at.
func DownloadStates(ctx context.Context, q Querier, now time.Time) ([]DownloadState, error) {
	rows, err := q.Query(ctx, `
		SELECT k.account_key, coalesce(w.used, 0), s.paused_until
		FROM (SELECT account_key FROM account_download_states
		      UNION SELECT account_key FROM account_downloads WHERE hour > $1) k
		LEFT JOIN (SELECT account_key, sum(bytes)::bigint AS used FROM account_downloads WHERE hour > $1 GROUP BY account_key) w
		       ON w.account_key = k.account_key
		LEFT JOIN account_download_states s ON s.account_key = k.account_key AND s.paused_until > $2
		ORDER BY k.account_key`, windowAfter(now), now)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the download budgets: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DownloadState, error) {
		var s DownloadState
		return s, r.Scan(&s.AccountKey, &s.Used, &s.PausedUntil)
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the download budgets: %w", err)
	}
	return out, nil
}
