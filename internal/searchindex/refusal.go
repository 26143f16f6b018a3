package searchindex

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// PassageRefusal is a passage the embedding provider refused for good, and
// the status it answered a request of that passage alone with.
type PassageRefusal struct {
	Passage PendingPassage
	Status  int
}

// RecordRefusals records rs under profile, so the refused passages no
// longer await a vector (PassagesAwaitingVectors): they are not offered
// for embedding again, nor counted as awaiting. A refusal is recorded only
// while its passage still holds the text that was refused, and goes with
// it: a passage whose text changes is written anew (writePassages) and
// awaits a vector again. A message none of whose passages awaits any more
// leaves the profile's backlog (SettleBacklog). It records a passage once; a second refusal of it
// changes nothing. It returns how many it recorded.
//
// It keeps the status and the time, never the text.
func RecordRefusals(ctx context.Context, q Querier, profile int16, rs []PassageRefusal) (int, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	ps := make([]PendingPassage, len(rs))
	statuses := make([]int16, len(rs))
	for i, r := range rs {
		ps[i], statuses[i] = r.Passage, int16(r.Status)
	}
	ids, ords, digests := passageKeys(ps)
	tag, err := q.Exec(ctx, `
		INSERT INTO passage_refusals (stored_email_id, ordinal, profile_id, status)
		SELECT n.id, n.o, $1, n.s
		FROM unnest($2::uuid[], $3::smallint[], $4::bytea[], $5::smallint[]) AS n(id, o, d, s)
		JOIN email_passages p ON p.stored_email_id = n.id AND p.ordinal = n.o AND sha256(convert_to(p.text, 'UTF8')) = n.d
		ON CONFLICT (stored_email_id, ordinal, profile_id) DO NOTHING`,
		profile, ids, ords, digests, statuses)
	if err != nil {
		return 0, fmt.Errorf("searchindex: record refused passages: %w", err)
	}
	if err := SettleBacklog(ctx, q, profile, ids); err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// passageKeys returns the columns that identify ps's passages as they
// were read: their messages, ordinals and the SHA-256 of their texts.
func passageKeys(ps []PendingPassage) ([]uuid.UUID, []int16, [][]byte) {
	ids, ords, digests := make([]uuid.UUID, len(ps)), make([]int16, len(ps)), make([][]byte, len(ps))
	for i, p := range ps {
		d := sha256.Sum256([]byte(p.Text))
		ids[i], ords[i], digests[i] = p.StoredEmailID, p.Ordinal, d[:]
	}
	return ids, ords, digests
}

// FolderRefusals is how many passages of one account's folder alias's
// served messages the provider refused under a profile.
type FolderRefusals struct {
	AccountKey string
	Alias      string
	Refused    int64
}

// RefusedPassagesByFolder counts, per account and folder alias (across the
// alias's bindings), the served messages' passages the provider refused
// under profile; a folder with none is left out. The sum over the folders
// is what AwaitingPerProfile counts as Refused for profile.
func RefusedPassagesByFolder(ctx context.Context, q Querier, profile int16) ([]FolderRefusals, error) {
	rows, err := q.Query(ctx, `
		SELECT a.account_key, f.alias, count(*)
		FROM passage_refusals r
		JOIN served_stored_emails e ON e.id = r.stored_email_id
		JOIN mail_folders f ON f.id = e.mail_folder_id
		JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		WHERE r.profile_id = $1
		GROUP BY a.account_key, f.alias
		ORDER BY a.account_key, f.alias`, profile)
	if err != nil {
		return nil, fmt.Errorf("searchindex: count refused passages by folder: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[FolderRefusals])
	if err != nil {
		return nil, fmt.Errorf("searchindex: count refused passages by folder: %w", err)
	}
	return out, nil
}
