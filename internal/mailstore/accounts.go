package mailstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// EnsureAccount returns the id of the account row for accountKey (the
// normalized account identifier configuration produced), creating it when
// no run has yet. Two runs creating it at once both succeed with the same
// id: the insert does nothing on conflict and the row is then read.
//
// In a transaction stricter than READ COMMITTED the row another run
// committed can be invisible to the read; that is reported as
// ErrConcurrencyConflict so a fresh transaction sees it.
func EnsureAccount(ctx context.Context, q Querier, accountKey string) (int64, error) {
	if strings.TrimSpace(accountKey) == "" {
		return 0, errors.New("mailstore: ensure account: the account key is blank")
	}
	if _, err := q.Exec(ctx,
		`INSERT INTO mailbox_accounts (account_key) VALUES ($1)
		 ON CONFLICT ON CONSTRAINT mailbox_accounts_account_key_key DO NOTHING`,
		accountKey); err != nil {
		return 0, fmt.Errorf("mailstore: ensure account: insert: %w", err)
	}
	var id int64
	err := q.QueryRow(ctx, `SELECT id FROM mailbox_accounts WHERE account_key = $1`, accountKey).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, conflict("the account row another run created is not visible to this transaction")
	case err != nil:
		return 0, fmt.Errorf("mailstore: ensure account: read: %w", err)
	}
	return id, nil
}
