package mailstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// A server that names its messages across folders (Gmail's X-GM-MSGID,
// OBJECTID's EMAILID) says which occurrences are one message: the first
// one stored holds the email — raw MIME, extraction, search document,
// passages, vectors — and every later occurrence of the same identity
// names it (Occurrence.SharedEmailID) and holds nothing but its own place
// and flags. served_stored_emails serves the holder once while any of the
// occurrences lives. A Message-ID or a content hash is never taken for
// such an identity: only the server's own statement is.

// SharedEmail is a stored email a server identity already names.
type SharedEmail struct {
	ID           uuid.UUID
	Availability Availability
	// Served reports whether the email was served when it was read: false
	// when its own occurrence was tombstoned and no other serves it, or
	// its UID space is not yet its folder's. A new occurrence may serve it
	// again.
	Served bool
}

// EmailsByServerIdentity returns, of the server identities ids
// (Occurrence.ServerEmailID values), those an email of the account already
// holds, keyed by identity. A holder whose own occurrence was tombstoned
// is returned too: a new occurrence serves it again.
func EmailsByServerIdentity(ctx context.Context, q Querier, accountID int64, ids []string) (map[string]SharedEmail, error) {
	out := map[string]SharedEmail{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT e.server_email_id, e.id, e.content_availability,
		       EXISTS (SELECT 1 FROM served_stored_emails s WHERE s.id = e.id)
		FROM stored_emails e
		WHERE e.mailbox_account_id = $1 AND e.server_email_id = ANY($2) AND e.shared_email_id IS NULL`, accountID, ids)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the emails of server identities: %w", err)
	}
	var (
		key string
		e   SharedEmail
	)
	_, err = pgx.ForEachRow(rows, []any{&key, &e.ID, &e.Availability, &e.Served}, func() error {
		out[key] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the emails of server identities: %w", err)
	}
	return out, nil
}

// ReleaseServerIdentities gives up the server identities held by the
// binding folderID's UID spaces other than uidValidity: a folder recreated
// on the server may give its new messages the identities of the old ones
// (Cyrus keeps a message's EMAILID across a delete and create), and a new
// UID space is stored from its start, as one of its own, never as
// occurrences of the space it replaces. Call it once the server reported
// the new UIDVALIDITY, before anything is stored under it.
//
// The old holders keep their content and are served as before: by their
// own occurrence until the new space replaces it, and while an occurrence
// of another folder shares them. It returns how many holders it released.
func ReleaseServerIdentities(ctx context.Context, q Querier, folderID int64, uidValidity uint32) (int64, error) {
	tag, err := q.Exec(ctx, `UPDATE stored_emails SET server_email_id = NULL, updated_at = now()
		WHERE mail_folder_id = $1 AND uid_validity <> $2
		  AND shared_email_id IS NULL AND server_email_id IS NOT NULL`, folderID, int64(uidValidity))
	if err != nil {
		return 0, fmt.Errorf("mailstore: release the server identities of folder %d: %w", folderID, err)
	}
	return tag.RowsAffected(), nil
}
