package dbassert

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// latestFolderID returns the id of alias's latest binding, of whichever
// account bound it, and false when it was never bound.
func latestFolderID(tb testing.TB, q Querier, alias string) (int64, bool) {
	tb.Helper()
	var id int64
	err := q.QueryRow(context.Background(),
		`SELECT id FROM mail_folders WHERE alias = $1 ORDER BY generation DESC LIMIT 1`, alias).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false
	}
	check(tb, err, fmt.Sprintf("read the latest binding of alias %q", alias))
	return id, true
}

// Checkpoint returns the checkpoint of alias's latest binding, and fails
// the test when it has none.
func Checkpoint(tb testing.TB, q Querier, alias string) mailstore.Checkpoint {
	tb.Helper()
	cp, ok := LatestCheckpoint(tb, q, alias)
	if !ok {
		tb.Fatalf("dbassert: alias %q has no checkpoint", alias)
	}
	return cp
}

// LatestCheckpoint returns the checkpoint of alias's latest binding, and
// false while there is none: the alias was never bound, or its binding
// never synchronized.
func LatestCheckpoint(tb testing.TB, q Querier, alias string) (mailstore.Checkpoint, bool) {
	tb.Helper()
	id, ok := latestFolderID(tb, q, alias)
	if !ok {
		return mailstore.Checkpoint{}, false
	}
	cp, ok, err := mailstore.ReadCheckpoint(context.Background(), q, id)
	check(tb, err, fmt.Sprintf("read the checkpoint of alias %q", alias))
	return cp, ok
}

// Generations returns the generations alias was bound in, in order.
func Generations(tb testing.TB, q Querier, alias string) []int {
	tb.Helper()
	doing := fmt.Sprintf("read the generations of alias %q", alias)
	rows, err := q.Query(context.Background(), `SELECT generation FROM mail_folders WHERE alias = $1 ORDER BY generation`, alias)
	check(tb, err, doing)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int])
	check(tb, err, doing)
	return out
}

// MappingChanges counts the audit records of alias's bindings: one each
// time it was bound to a remote path.
func MappingChanges(tb testing.TB, q Querier, alias string) int {
	tb.Helper()
	return count(tb, q, fmt.Sprintf("count the mapping changes of alias %q", alias),
		`SELECT count(*) FROM mail_folder_mapping_changes WHERE alias = $1`, alias)
}

// WithheldNotes counts the messages whose content a server withheld and
// that wait for another pass to ask again.
func WithheldNotes(tb testing.TB, q Querier) int {
	tb.Helper()
	return count(tb, q, "count the withheld contents", `SELECT count(*) FROM withheld_contents`)
}
