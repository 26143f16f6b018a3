package mailstore

import (
	"context"
	"fmt"
)

// NoteWithheld records, each in the caller's transaction, that the server
// withheld the content of uids of folderID under uidValidity in one more
// pass — it listed them, but its FETCH answer left them out or answered
// BODY[] with NIL — and returns how many passes each has now been withheld
// in.
func NoteWithheld(ctx context.Context, q Querier, folderID int64, uidValidity uint32, uids []uint32) (map[uint32]int, error) {
	ids := make([]int64, len(uids))
	for i, u := range uids {
		ids[i] = int64(u)
	}
	rows, err := q.Query(ctx, `
		INSERT INTO withheld_contents (mail_folder_id, uid_validity, uid)
		SELECT $1, $2, u FROM unnest($3::bigint[]) u
		ON CONFLICT (mail_folder_id, uid_validity, uid)
		DO UPDATE SET passes = withheld_contents.passes + 1, last_seen_at = now()
		RETURNING uid, passes`, folderID, int64(uidValidity), ids)
	if err != nil {
		return nil, fmt.Errorf("mailstore: note withheld content of folder %d: %w", folderID, err)
	}
	defer rows.Close()
	out := make(map[uint32]int, len(uids))
	for rows.Next() {
		var uid int64
		var passes int
		if err := rows.Scan(&uid, &passes); err != nil {
			return nil, fmt.Errorf("mailstore: note withheld content of folder %d: %w", folderID, err)
		}
		out[uint32(uid)] = passes
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mailstore: note withheld content of folder %d: %w", folderID, err)
	}
	return out, nil
}

// ForgetWithheld drops the withheld-content count of uids of folderID
// under uidValidity: their content arrived, or they were recorded as
// ContentWithheld.
func ForgetWithheld(ctx context.Context, q Querier, folderID int64, uidValidity uint32, uids []uint32) error {
	ids := make([]int64, len(uids))
	for i, u := range uids {
		ids[i] = int64(u)
	}
	if _, err := q.Exec(ctx, `DELETE FROM withheld_contents
		WHERE mail_folder_id = $1 AND uid_validity = $2 AND uid = ANY($3::bigint[])`,
		folderID, int64(uidValidity), ids); err != nil {
		return fmt.Errorf("mailstore: forget withheld content of folder %d: %w", folderID, err)
	}
	return nil
}
