package mailstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// An account's runs fail or succeed as a whole: a run counts as failed
// when the account run itself or any pass or window of its folders failed,
// and the wait before the account's next run grows with the failed runs in
// a row (the run backoff). The state behind that lives in account_states;
// per folder alias, folder_states keeps the outcome and cumulative counts
// an operator reads.

// AccountState is an account's row of account_states.
type AccountState struct {
	AccountKey string
	// ConsecutiveFailures counts the failed runs before the current one.
	ConsecutiveFailures int
	// RunStartedAt is when the current (or last) run started; nil before
	// the first.
	RunStartedAt *time.Time
	// RunFailed reports that the current run has failed so far.
	RunFailed           bool
	LastFailureAt       *time.Time
	LastFailureIdentity string
}

// BeginRun starts a run of accountKey at now, in tx. It settles the
// previous run first — a failed one adds to the consecutive failures, one
// that did not fail clears them, one its server throttled (ThrottleRun)
// leaves them as they were — and returns the settled state.
func BeginRun(ctx context.Context, tx pgx.Tx, accountKey string, now time.Time) (AccountState, error) {
	st, err := lockAccountState(ctx, tx, accountKey)
	if err != nil {
		return st, err
	}
	var throttled bool
	if err := tx.QueryRow(ctx, `SELECT run_throttled FROM account_states WHERE account_key = $1`, accountKey).Scan(&throttled); err != nil {
		return st, fmt.Errorf("mailstore: begin a run: %w", err)
	}
	if st.RunStartedAt != nil && !throttled {
		if st.RunFailed {
			st.ConsecutiveFailures++
		} else {
			st.ConsecutiveFailures = 0
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE account_states
		SET consecutive_failures = $2, run_started_at = $3, run_failed = false, run_throttled = false
		WHERE account_key = $1`, accountKey, st.ConsecutiveFailures, now); err != nil {
		return st, fmt.Errorf("mailstore: begin a run: %w", err)
	}
	st.RunStartedAt, st.RunFailed = &now, false
	return st, nil
}

func lockAccountState(ctx context.Context, tx pgx.Tx, accountKey string) (AccountState, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO account_states (account_key) VALUES ($1) ON CONFLICT DO NOTHING`, accountKey); err != nil {
		return AccountState{}, fmt.Errorf("mailstore: read the run state: %w", err)
	}
	st, err := scanAccountState(tx.QueryRow(ctx, `SELECT `+accountStateColumns+` FROM account_states
		WHERE account_key = $1 FOR UPDATE`, accountKey))
	if err != nil {
		return AccountState{}, fmt.Errorf("mailstore: read the run state: %w", err)
	}
	return st, nil
}

const accountStateColumns = `account_key, consecutive_failures, run_started_at, run_failed, last_failure_at, coalesce(last_failure_identity, '')`

func scanAccountState(row pgx.Row) (AccountState, error) {
	var st AccountState
	err := row.Scan(&st.AccountKey, &st.ConsecutiveFailures, &st.RunStartedAt, &st.RunFailed, &st.LastFailureAt, &st.LastFailureIdentity)
	return st, err
}

// ReadAccountState returns accountKey's state, and false when it never
// ran.
func ReadAccountState(ctx context.Context, q Querier, accountKey string) (AccountState, bool, error) {
	st, err := scanAccountState(q.QueryRow(ctx, `SELECT `+accountStateColumns+` FROM account_states WHERE account_key = $1`, accountKey))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return AccountState{}, false, nil
	case err != nil:
		return AccountState{}, false, fmt.Errorf("mailstore: read the run state: %w", err)
	}
	return st, true, nil
}

// ThrottleRun records that the current run of accountKey was throttled
// by its server before it scheduled anything: the run that begins next
// does not settle it (see BeginRun). A run that already failed stays
// failed.
func ThrottleRun(ctx context.Context, q Querier, accountKey string) error {
	if _, err := q.Exec(ctx, `UPDATE account_states SET run_throttled = true
		WHERE account_key = $1 AND NOT run_failed`, accountKey); err != nil {
		return fmt.Errorf("mailstore: record a throttled run: %w", err)
	}
	return nil
}

// FailRun records that the current run of accountKey failed, with the
// failure's identity.
func FailRun(ctx context.Context, q Querier, accountKey, identity string, at time.Time) error {
	if _, err := q.Exec(ctx, `
		INSERT INTO account_states (account_key, run_failed, last_failure_at, last_failure_identity)
		VALUES ($1, true, $3, $2)
		ON CONFLICT (account_key) DO UPDATE
		SET run_failed = true, last_failure_at = $3, last_failure_identity = $2`, accountKey, identity, at); err != nil {
		return fmt.Errorf("mailstore: record a failed run: %w", err)
	}
	return nil
}

// FailFolder records that a pass or window of accountKey's alias failed,
// which fails the account's current run too, and returns the account's
// state as it now stands.
func FailFolder(ctx context.Context, q Querier, accountKey, alias, identity string, at time.Time) (AccountState, error) {
	if _, err := q.Exec(ctx, `
		INSERT INTO folder_states (account_key, alias, last_failure_at, last_failure_identity)
		VALUES ($1, $2, $4, $3)
		ON CONFLICT (account_key, alias) DO UPDATE
		SET last_failure_at = $4, last_failure_identity = $3`, accountKey, alias, identity, at); err != nil {
		return AccountState{}, fmt.Errorf("mailstore: record a failed folder: %w", err)
	}
	if err := FailRun(ctx, q, accountKey, identity, at); err != nil {
		return AccountState{}, err
	}
	st, _, err := ReadAccountState(ctx, q, accountKey)
	return st, err
}

// FolderHealthy reports whether accountKey's alias has no failure recorded
// since its last successful pass: it never failed, or a pass walked it to
// its end after its latest failure. A folder with no recorded state is
// healthy.
func FolderHealthy(ctx context.Context, q Querier, accountKey, alias string) (bool, error) {
	var healthy bool
	err := q.QueryRow(ctx, `
		SELECT last_failure_at IS NULL OR (last_success_at IS NOT NULL AND last_success_at >= last_failure_at)
		FROM folder_states WHERE account_key = $1 AND alias = $2`, accountKey, alias).Scan(&healthy)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("mailstore: read whether a folder is healthy: %w", err)
	}
	return healthy, nil
}

// PassCounts are what a forward pass adds to its folder's counts.
type PassCounts struct {
	Stored, Oversized, Unreadable, ExcludedByDate, ExpungedBeforeFetch, Withheld int
}

// RecordPass adds a forward pass's counts to accountKey's alias and
// records when it ran; complete reports that it walked the folder to its
// end, which makes it the alias's last successful pass.
func RecordPass(ctx context.Context, q Querier, accountKey, alias string, c PassCounts, complete bool, at time.Time) error {
	var success *time.Time
	if complete {
		success = &at
	}
	if _, err := q.Exec(ctx, `
		INSERT INTO folder_states AS s (account_key, alias, stored, oversized, unreadable, excluded_by_date,
			expunged_before_fetch, content_withheld, last_pass_at, last_success_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (account_key, alias) DO UPDATE SET
			stored = s.stored + excluded.stored,
			oversized = s.oversized + excluded.oversized,
			unreadable = s.unreadable + excluded.unreadable,
			excluded_by_date = s.excluded_by_date + excluded.excluded_by_date,
			expunged_before_fetch = s.expunged_before_fetch + excluded.expunged_before_fetch,
			content_withheld = s.content_withheld + excluded.content_withheld,
			last_pass_at = excluded.last_pass_at,
			last_success_at = coalesce(excluded.last_success_at, s.last_success_at)`,
		accountKey, alias, c.Stored, c.Oversized, c.Unreadable, c.ExcludedByDate, c.ExpungedBeforeFetch, c.Withheld, at, success); err != nil {
		return fmt.Errorf("mailstore: record a pass: %w", err)
	}
	return nil
}

// RecordExamined records uidNext, the UIDNEXT a forward pass of
// accountKey's alias found when it examined the folder, as the alias's
// latest; with the checkpoint it says how far a synchronization has got.
// A pass that ended before its EXAMINE answered records nothing.
func RecordExamined(ctx context.Context, q Querier, accountKey, alias string, uidNext uint32) error {
	if uidNext == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, `
		INSERT INTO folder_states (account_key, alias, examined_uid_next) VALUES ($1, $2, $3)
		ON CONFLICT (account_key, alias) DO UPDATE SET examined_uid_next = $3`,
		accountKey, alias, int64(uidNext)); err != nil {
		return fmt.Errorf("mailstore: record the examined folder: %w", err)
	}
	return nil
}

// Compression is what a forward pass decided about COMPRESS=DEFLATE on
// its content connection, and why.
type Compression struct {
	InUse  bool
	Reason string
}

// RecordCompression records c as what accountKey's alias decided in its
// latest pass. A decision equal to the recorded one writes nothing.
func RecordCompression(ctx context.Context, q Querier, accountKey, alias string, c Compression) error {
	if _, err := q.Exec(ctx, `
		UPDATE folder_states SET compression_in_use = $3, compression_reason = $4
		WHERE account_key = $1 AND alias = $2
		  AND (compression_in_use IS DISTINCT FROM $3 OR compression_reason IS DISTINCT FROM $4)`,
		accountKey, alias, c.InUse, c.Reason); err != nil {
		return fmt.Errorf("mailstore: record the compression decision: %w", err)
	}
	return nil
}

// FolderState is a row of folder_states.
type FolderState struct {
	AccountKey, Alias   string
	Counts              PassCounts
	LastPassAt          *time.Time
	LastSuccessAt       *time.Time
	LastFailureAt       *time.Time
	LastFailureIdentity string
	// EffectiveMode is ModePush or ModePolling as a push account's watch
	// last recorded it, "" when none has.
	EffectiveMode string
	// Compression is what the latest pass decided about compression; nil
	// before the first pass that opened a content connection.
	Compression *Compression
	// ResolutionFailure is, when the account's latest run resolved the
	// alias to no folder, the identity of why (RecordResolutions); ""
	// otherwise.
	ResolutionFailure string
	// ExaminedUIDNext is the UIDNEXT the latest pass found (RecordExamined);
	// 0 before the first.
	ExaminedUIDNext uint32
}

// RunStates returns every account's and folder alias's state.
func RunStates(ctx context.Context, q Querier) ([]AccountState, []FolderState, error) {
	rows, err := q.Query(ctx, `SELECT `+accountStateColumns+` FROM account_states ORDER BY account_key`)
	if err != nil {
		return nil, nil, fmt.Errorf("mailstore: read the run states: %w", err)
	}
	accounts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AccountState, error) { return scanAccountState(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("mailstore: read the run states: %w", err)
	}
	rows, err = q.Query(ctx, `SELECT account_key, alias, stored, oversized, unreadable, excluded_by_date,
		expunged_before_fetch, content_withheld, last_pass_at, last_success_at, last_failure_at,
		coalesce(last_failure_identity, ''), coalesce(effective_mode, ''), compression_in_use, coalesce(compression_reason, ''),
		coalesce(resolution_failure, ''), coalesce(examined_uid_next, 0)
		FROM folder_states ORDER BY account_key, alias`)
	if err != nil {
		return nil, nil, fmt.Errorf("mailstore: read the folder states: %w", err)
	}
	folders, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FolderState, error) {
		var f FolderState
		var inUse *bool
		var reason string
		var uidNext int64
		c := &f.Counts
		err := r.Scan(&f.AccountKey, &f.Alias, &c.Stored, &c.Oversized, &c.Unreadable, &c.ExcludedByDate,
			&c.ExpungedBeforeFetch, &c.Withheld, &f.LastPassAt, &f.LastSuccessAt, &f.LastFailureAt, &f.LastFailureIdentity, &f.EffectiveMode,
			&inUse, &reason, &f.ResolutionFailure, &uidNext)
		f.ExaminedUIDNext = uint32(uidNext)
		if inUse != nil {
			f.Compression = &Compression{InUse: *inUse, Reason: reason}
		}
		return f, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mailstore: read the folder states: %w", err)
	}
	return accounts, folders, nil
}

// ClearFailures forgets accountKey's failed runs, in the caller's
// transaction — what starting a process means: an operator asking for
// work now — and returns when its last run started (nil if it never ran).
func ClearFailures(ctx context.Context, q Querier, accountKey string) (*time.Time, error) {
	var started *time.Time
	err := q.QueryRow(ctx, `UPDATE account_states SET consecutive_failures = 0, run_failed = false
		WHERE account_key = $1 RETURNING run_started_at`, accountKey).Scan(&started)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("mailstore: clear the failed runs: %w", err)
	}
	return started, nil
}

// FolderContents is what is stored of one account's folder alias, across
// its binding generations, and how far its latest binding got.
type FolderContents struct {
	AccountKey, Alias string
	// Stored, Oversized and Withheld count the messages served with their
	// content, over the size limit, and with their content withheld.
	Stored, Oversized, Withheld int
	// Tombstoned counts the messages the server no longer holds that are
	// kept and no longer served.
	Tombstoned int
	// UIDValidity and LastSeenUID are the latest binding's checkpoint; zero
	// before the first.
	UIDValidity, LastSeenUID uint32
}

// Contents returns every bound folder alias's contents.
func Contents(ctx context.Context, q Querier) ([]FolderContents, error) {
	rows, err := q.Query(ctx, `
		WITH latest AS (
			SELECT DISTINCT ON (mailbox_account_id, alias) id, mailbox_account_id, alias
			FROM mail_folders ORDER BY mailbox_account_id, alias, generation DESC
		), served AS (
			SELECT f.mailbox_account_id, f.alias,
			       count(*) FILTER (WHERE s.content_availability = 'Available') AS stored,
			       count(*) FILTER (WHERE s.content_availability = 'ExceededSizeLimit') AS oversized,
			       count(*) FILTER (WHERE s.content_availability = 'ContentWithheld') AS withheld
			FROM served_stored_emails s JOIN mail_folders f ON f.id = s.mail_folder_id
			GROUP BY f.mailbox_account_id, f.alias
		), gone AS (
			SELECT f.mailbox_account_id, f.alias, count(*) AS tombstoned
			FROM stored_emails e JOIN mail_folders f ON f.id = e.mail_folder_id
			WHERE e.remote_expunge_observed_at IS NOT NULL
			GROUP BY f.mailbox_account_id, f.alias
		)
		SELECT a.account_key, l.alias,
		       coalesce(s.stored, 0), coalesce(s.oversized, 0), coalesce(s.withheld, 0), coalesce(g.tombstoned, 0),
		       coalesce(c.uid_validity, 0), coalesce(c.last_seen_uid, 0)
		FROM latest l
		JOIN mailbox_accounts a ON a.id = l.mailbox_account_id
		LEFT JOIN served s ON s.mailbox_account_id = l.mailbox_account_id AND s.alias = l.alias
		LEFT JOIN gone g ON g.mailbox_account_id = l.mailbox_account_id AND g.alias = l.alias
		LEFT JOIN synchronization_checkpoints c ON c.mail_folder_id = l.id
		ORDER BY a.account_key, l.alias`)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the folders' contents: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FolderContents, error) {
		var f FolderContents
		var validity, last int64
		err := r.Scan(&f.AccountKey, &f.Alias, &f.Stored, &f.Oversized, &f.Withheld, &f.Tombstoned, &validity, &last)
		f.UIDValidity, f.LastSeenUID = uint32(validity), uint32(last)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the folders' contents: %w", err)
	}
	return out, nil
}
