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
	rows, err := q.Query(ctx, `SELECT server_email_id, id, content_availability FROM stored_emails
		WHERE mailbox_account_id = $1 AND server_email_id = ANY($2) AND shared_email_id IS NULL`, accountID, ids)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the emails of server identities: %w", err)
	}
	var (
		key string
		e   SharedEmail
	)
	_, err = pgx.ForEachRow(rows, []any{&key, &e.ID, &e.Availability}, func() error {
		out[key] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the emails of server identities: %w", err)
	}
	return out, nil
}
