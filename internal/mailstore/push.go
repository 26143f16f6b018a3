package mailstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Push synchronization keeps per account and folder alias in
// folder_states: the mark a report leaves for a pass that is already
// running (change_reported_at); the folder's effective mode, so that the
// line announcing a mode is written only when it changes; and what the
// last completed pass observed of the folder, which a watching session
// that starts compares with what the server reports now. Per account,
// account_states keeps when a server that declined a subscription is asked
// again.

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

// ObservedState is a folder as a forward pass found it when it examined
// it: the binding it examined and what EXAMINE reported. HighestModSeq is
// 0 on a server without CONDSTORE.
type ObservedState struct {
	BindingID                    int64
	UIDValidity, UIDNext, Exists uint32
	HighestModSeq                uint64
}

// RecordObservedState records, in q — the transaction that completes a
// forward pass of alias of accountKey — what that pass observed as it
// examined the folder, replacing what an earlier pass recorded. A pass
// that ends early records nothing: only a pass that read everything below
// the UIDNEXT it observed leaves nothing to catch up on.
func RecordObservedState(ctx context.Context, q Querier, accountKey, alias string, st ObservedState) error {
	if _, err := q.Exec(ctx, `
		INSERT INTO folder_states AS s (account_key, alias, observed_binding_id, observed_uid_validity,
			observed_uid_next, observed_exists, observed_highest_modseq)
		VALUES ($1, $2, $3, $4, $5, $6, $7::text::numeric)
		ON CONFLICT (account_key, alias) DO UPDATE SET
			observed_binding_id = excluded.observed_binding_id,
			observed_uid_validity = excluded.observed_uid_validity,
			observed_uid_next = excluded.observed_uid_next,
			observed_exists = excluded.observed_exists,
			observed_highest_modseq = excluded.observed_highest_modseq`,
		accountKey, alias, st.BindingID, int64(st.UIDValidity), int64(st.UIDNext), int64(st.Exists),
		strconv.FormatUint(st.HighestModSeq, 10)); err != nil {
		return fmt.Errorf("mailstore: record what a pass observed: %w", err)
	}
	return nil
}

// ObservedStates returns, by alias, what the last completed forward pass
// of each alias of accountKey observed; an alias no pass completed since
// it was recorded is missing.
func ObservedStates(ctx context.Context, q Querier, accountKey string) (map[string]ObservedState, error) {
	rows, err := q.Query(ctx, `
		SELECT alias, observed_binding_id, observed_uid_validity, observed_uid_next, observed_exists,
		       observed_highest_modseq::text
		FROM folder_states WHERE account_key = $1 AND observed_binding_id IS NOT NULL`, accountKey)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read what passes observed: %w", err)
	}
	out := map[string]ObservedState{}
	var (
		alias                  string
		st                     ObservedState
		validity, next, exists int64
		modseq                 string
	)
	_, err = pgx.ForEachRow(rows, []any{&alias, &st.BindingID, &validity, &next, &exists, &modseq}, func() error {
		m, err := strconv.ParseUint(modseq, 10, 64)
		if err != nil {
			return err
		}
		st.UIDValidity, st.UIDNext, st.Exists, st.HighestModSeq = uint32(validity), uint32(next), uint32(exists), m
		out[alias] = st
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read what passes observed: %w", err)
	}
	return out, nil
}

// SubscriptionRetryAt returns when a mail server that declined accountKey's
// push subscription, or advertised no NOTIFY, is asked for one again; the
// zero time when it has not been put off.
func SubscriptionRetryAt(ctx context.Context, q Querier, accountKey string) (time.Time, error) {
	var at *time.Time
	err := q.QueryRow(ctx, `SELECT push_subscription_retry_at FROM account_states WHERE account_key = $1`, accountKey).Scan(&at)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("mailstore: read when a push subscription is asked for again: %w", err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// SetSubscriptionRetryAt records at as when accountKey's mail server is
// asked for a push subscription again.
func SetSubscriptionRetryAt(ctx context.Context, q Querier, accountKey string, at time.Time) error {
	if _, err := q.Exec(ctx, `
		INSERT INTO account_states AS a (account_key, push_subscription_retry_at) VALUES ($1, $2)
		ON CONFLICT (account_key) DO UPDATE SET push_subscription_retry_at = excluded.push_subscription_retry_at`,
		accountKey, at); err != nil {
		return fmt.Errorf("mailstore: record when a push subscription is asked for again: %w", err)
	}
	return nil
}
