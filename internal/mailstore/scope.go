package mailstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A binding serves one UID space at a time (mail_folders.served_uid_validity,
// read through the served_stored_emails view). A folder recreated on the
// server answers under a new UIDVALIDITY and is stored again under it;
// until the new UID space has been walked to its end the old one is what
// every query serves, so there is never a moment with neither copy, and
// from then on only the new one. The old rows are kept, never deleted.

// ScopeChange is what ServeScope changed.
type ScopeChange struct {
	// Replaced reports that the binding served another UID space before.
	Replaced bool `json:"replaced,omitempty"`
	// Invalidated counts the occurrences of the UID spaces no longer
	// served: kept, and excluded from every query as a tombstone is.
	Invalidated int `json:"invalidated,omitempty"`
}

// ServeScope makes the binding folderID serve uidValidity, in the caller's
// transaction. Call it with the write that records a UID space walked to
// its end (a pass's final checkpoint). It changes nothing when the binding
// already serves uidValidity.
func ServeScope(ctx context.Context, q Querier, folderID int64, uidValidity uint32) (ScopeChange, error) {
	var served *int64
	err := q.QueryRow(ctx, `SELECT served_uid_validity FROM mail_folders WHERE id = $1 FOR UPDATE`, folderID).Scan(&served)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ScopeChange{}, fmt.Errorf("mailstore: serve a UID space: folder %d has no binding", folderID)
	case err != nil:
		return ScopeChange{}, fmt.Errorf("mailstore: serve a UID space of folder %d: %w", folderID, err)
	case served != nil && *served == int64(uidValidity):
		return ScopeChange{}, nil
	}
	if _, err := q.Exec(ctx, `UPDATE mail_folders SET served_uid_validity = $2 WHERE id = $1`, folderID, int64(uidValidity)); err != nil {
		return ScopeChange{}, fmt.Errorf("mailstore: serve a UID space of folder %d: %w", folderID, err)
	}
	if served == nil {
		return ScopeChange{}, nil
	}
	change := ScopeChange{Replaced: true}
	if err := q.QueryRow(ctx, `SELECT count(*) FROM stored_emails
		WHERE mail_folder_id = $1 AND uid_validity <> $2 AND remote_expunge_observed_at IS NULL`,
		folderID, int64(uidValidity)).Scan(&change.Invalidated); err != nil {
		return ScopeChange{}, fmt.Errorf("mailstore: count the occurrences no longer served of folder %d: %w", folderID, err)
	}
	return change, nil
}

// ServeFirstScope makes the binding folderID serve uidValidity when it
// serves no UID space yet (its first checkpoint), in the caller's
// transaction; otherwise it changes nothing.
func ServeFirstScope(ctx context.Context, q Querier, folderID int64, uidValidity uint32) error {
	if _, err := q.Exec(ctx, `UPDATE mail_folders SET served_uid_validity = $2 WHERE id = $1 AND served_uid_validity IS NULL`,
		folderID, int64(uidValidity)); err != nil {
		return fmt.Errorf("mailstore: serve the first UID space of folder %d: %w", folderID, err)
	}
	return nil
}
