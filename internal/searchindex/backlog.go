package searchindex

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SettleBacklog takes out of profile's backlog the messages among ids
// none of whose passages awaits a vector under it: each has its vector or
// its refusal (RecordRefusals). A message a writer is giving
// passages at this moment is left for the embed job that writer offers it
// to, rather than waited for. Given a caller's transaction, the settled
// rows stay locked until it ends.
//
// The rows are locked before the passages are read, in a statement of its
// own, so the read sees every passage written by a writer that held a row
// first; a writer that comes later waits for the settling and writes the
// row again.
func SettleBacklog(ctx context.Context, q Querier, profile int16, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	settle := func(q Querier) error {
		rows, err := q.Query(ctx, `
			SELECT stored_email_id FROM vector_backlog
			WHERE profile_id = $1 AND stored_email_id = ANY($2)
			ORDER BY stored_email_id FOR UPDATE SKIP LOCKED`, profile, ids)
		if err != nil {
			return err
		}
		locked, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil || len(locked) == 0 {
			return err
		}
		_, err = q.Exec(ctx, `
			DELETE FROM vector_backlog b
			WHERE b.profile_id = $1 AND b.stored_email_id = ANY($2)
			  AND NOT EXISTS (SELECT 1 FROM email_passages p
			                  WHERE p.stored_email_id = b.stored_email_id
			                    AND `+awaitsVector("$1")+`)`,
			profile, locked)
		return err
	}
	var err error
	if db, ok := q.(interface {
		Begin(context.Context) (pgx.Tx, error)
	}); ok {
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return settle(tx) })
	} else {
		err = settle(q)
	}
	if err != nil {
		return fmt.Errorf("searchindex: settle the vector backlog: %w", err)
	}
	return nil
}

// ProfileBacklog is how many served messages await vectors under one
// profile, and how many of their passages the provider refused under it.
type ProfileBacklog struct {
	ProfileID  int16
	Model      string
	Dimensions int
	Awaiting   int64
	// Refused counts the served messages' passages the provider refused
	// (RecordRefusals); none of them awaits a vector.
	Refused int64
}

// AwaitingPerProfile counts, for every recorded profile, the served
// messages with a passage awaiting a vector under it — its backlog's
// served messages, so the count costs what awaits, not what is stored —
// and the served messages' passages the provider refused, which cost what
// was refused.
func AwaitingPerProfile(ctx context.Context, q Querier) ([]ProfileBacklog, error) {
	rows, err := q.Query(ctx, `
		SELECT pr.id, pr.model, pr.dimensions,
		       (SELECT count(*) FROM vector_backlog b JOIN served_stored_emails e ON e.id = b.stored_email_id
		        WHERE b.profile_id = pr.id),
		       (SELECT count(*) FROM passage_refusals r JOIN served_stored_emails e ON e.id = r.stored_email_id
		        WHERE r.profile_id = pr.id)
		FROM embedding_profiles pr ORDER BY pr.id`)
	if err != nil {
		return nil, fmt.Errorf("searchindex: count emails awaiting vectors: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ProfileBacklog])
	if err != nil {
		return nil, fmt.Errorf("searchindex: count emails awaiting vectors: %w", err)
	}
	return out, nil
}

// FolderBacklog is how many served messages of one account's folder alias
// await vectors under a profile.
type FolderBacklog struct {
	AccountKey string
	Alias      string
	Awaiting   int64
}

// AwaitingVectorsByFolder counts, per account and folder alias (across the
// alias's bindings), the served messages with a passage awaiting a vector
// under profile, from its backlog; a folder with none is left out. The sum
// over the folders is what AwaitingPerProfile counts for profile. A
// profile that is not recorded yet has no backlog: every message with
// passages awaits it (AwaitingWithoutProfile).
func AwaitingVectorsByFolder(ctx context.Context, q Querier, profile int16) ([]FolderBacklog, error) {
	return folderBacklog(ctx, q, `
		SELECT a.account_key, f.alias, count(*)
		FROM vector_backlog b
		JOIN served_stored_emails e ON e.id = b.stored_email_id
		JOIN mail_folders f ON f.id = e.mail_folder_id
		JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		WHERE b.profile_id = $1
		GROUP BY a.account_key, f.alias
		ORDER BY a.account_key, f.alias`, profile)
}

// AwaitingWithoutProfile is AwaitingVectorsByFolder for a profile not
// recorded yet, which has no vector and no backlog: every served message
// with passages awaits. It reads the passages, so it is for the moments
// before a profile's first embedding, not for every status request.
func AwaitingWithoutProfile(ctx context.Context, q Querier) ([]FolderBacklog, error) {
	return folderBacklog(ctx, q, `
		SELECT a.account_key, f.alias, count(*)
		FROM served_stored_emails e
		JOIN mail_folders f ON f.id = e.mail_folder_id
		JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		WHERE EXISTS (SELECT 1 FROM email_passages p WHERE p.stored_email_id = e.id)
		GROUP BY a.account_key, f.alias
		ORDER BY a.account_key, f.alias`)
}

// folderBacklog runs a count by account and alias.
func folderBacklog(ctx context.Context, q Querier, sql string, args ...any) ([]FolderBacklog, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("searchindex: count emails awaiting vectors by folder: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[FolderBacklog])
	if err != nil {
		return nil, fmt.Errorf("searchindex: count emails awaiting vectors by folder: %w", err)
	}
	return out, nil
}
