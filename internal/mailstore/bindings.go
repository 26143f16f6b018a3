package mailstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Binding is one mail_folders row: an alias bound to one remote folder under
// a resolution generation. Its ID is the folder component of the occurrence
// identity, so a repointed alias stores its mail under a new ID.
type Binding struct {
	ID         int64
	AccountID  int64
	Alias      string
	Generation int
	// RemotePath is the advertised path, byte for byte (IMAP allows
	// surrounding spaces). Never put it in a log line or an error.
	RemotePath string
	// Delimiter is the hierarchy delimiter the server advertised, "" for
	// none.
	Delimiter string
}

// BindingChange says what CommitBinding did.
type BindingChange int

const (
	// BindingUnchanged: the alias's latest generation already names the
	// remote path (possibly committed by a concurrent run just now).
	BindingUnchanged BindingChange = iota
	// BindingFirst: the alias had no binding; generation 1 was committed.
	BindingFirst
	// BindingRepointed: the alias named another remote path; the next
	// generation was committed.
	BindingRepointed
)

func (c BindingChange) String() string {
	switch c {
	case BindingUnchanged:
		return "Unchanged"
	case BindingFirst:
		return "First"
	case BindingRepointed:
		return "Repointed"
	}
	return fmt.Sprintf("BindingChange(%d)", int(c))
}

const bindingColumns = `id, mailbox_account_id, alias, generation, remote_path, coalesce(hierarchy_delimiter, '')`

func scanBinding(row pgx.Row) (Binding, error) {
	var b Binding
	err := row.Scan(&b.ID, &b.AccountID, &b.Alias, &b.Generation, &b.RemotePath, &b.Delimiter)
	return b, err
}

// LatestBinding returns the alias's binding with the highest generation,
// and false when the alias was never bound.
func LatestBinding(ctx context.Context, q Querier, accountID int64, alias string) (Binding, bool, error) {
	b, err := scanBinding(q.QueryRow(ctx,
		`SELECT `+bindingColumns+` FROM mail_folders
		 WHERE mailbox_account_id = $1 AND alias = $2
		 ORDER BY generation DESC LIMIT 1`,
		accountID, alias))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Binding{}, false, nil
	case err != nil:
		return Binding{}, false, fmt.Errorf("mailstore: read the latest binding of alias %q: %w", alias, err)
	}
	return b, true, nil
}

// LatestBindings returns the latest binding of each of aliases that was
// ever bound, by alias. It reads them in one statement, so in one snapshot:
// bindings an account run committed together are all seen or none are,
// which reading them one by one (LatestBinding) while the run commits does
// not promise.
func LatestBindings(ctx context.Context, q Querier, accountID int64, aliases []string) (map[string]Binding, error) {
	rows, err := q.Query(ctx,
		`SELECT DISTINCT ON (alias) `+bindingColumns+` FROM mail_folders
		 WHERE mailbox_account_id = $1 AND alias = ANY($2)
		 ORDER BY alias, generation DESC`,
		accountID, aliases)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the latest bindings of %d aliases: %w", len(aliases), err)
	}
	bindings, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Binding, error) { return scanBinding(r) })
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the latest bindings of %d aliases: %w", len(aliases), err)
	}
	out := make(map[string]Binding, len(bindings))
	for _, b := range bindings {
		out[b.Alias] = b
	}
	return out, nil
}

// CommitBinding records, in the caller's transaction, that alias resolved to
// remotePath, before anything is synchronized under it:
//
//   - the alias's latest generation names remotePath exactly: nothing
//     changes (BindingUnchanged) but a changed delimiter, which is updated;
//   - the alias was never bound: generation 1 (BindingFirst);
//   - it names another path: the next generation (BindingRepointed), with
//     the binding it replaces returned as previous.
//
// A first binding or a repointing writes its mail_folder_mapping_changes
// record in the same statement as the binding.
//
// When a concurrent run committed the same generation first, its binding is
// adopted if it names remotePath (BindingUnchanged), and refused with
// ErrConcurrencyConflict if it names another remote folder, so one (alias,
// generation) never names two folders. The race costs no error inside the
// transaction: the caller's transaction stays usable either way.
func CommitBinding(ctx context.Context, tx pgx.Tx, accountID int64, alias, remotePath, delimiter string) (Binding, BindingChange, *Binding, error) {
	switch {
	case strings.TrimSpace(alias) == "":
		return Binding{}, 0, nil, errors.New("mailstore: commit binding: the alias is blank")
	case remotePath == "":
		return Binding{}, 0, nil, fmt.Errorf("mailstore: commit binding of alias %q: the remote path is empty", alias)
	}

	latest, found, err := LatestBinding(ctx, tx, accountID, alias)
	if err != nil {
		return Binding{}, 0, nil, fmt.Errorf("mailstore: commit binding: %w", err)
	}
	if found && latest.RemotePath == remotePath {
		latest, err = updateDelimiter(ctx, tx, latest, delimiter)
		return latest, BindingUnchanged, nil, err
	}

	generation, change, previous := 1, BindingFirst, (*Binding)(nil)
	var previousPath *string
	if found {
		generation, change = latest.Generation+1, BindingRepointed
		prev := latest
		previous, previousPath = &prev, &prev.RemotePath
	}

	// ON CONFLICT DO NOTHING rather than a unique violation, so losing the
	// race leaves the caller's transaction usable; under READ COMMITTED the
	// insert waits for the other run's transaction and the re-read below
	// sees its row.
	b := Binding{AccountID: accountID, Alias: alias, Generation: generation, RemotePath: remotePath, Delimiter: delimiter}
	err = tx.QueryRow(ctx,
		`WITH bound AS (
		     INSERT INTO mail_folders (mailbox_account_id, alias, generation, remote_path, hierarchy_delimiter)
		     VALUES ($1, $2, $3, $4, nullif($5, ''))
		     ON CONFLICT ON CONSTRAINT mail_folders_account_alias_generation_key DO NOTHING
		     RETURNING id, mailbox_account_id, alias, generation, remote_path
		 ), audited AS (
		     INSERT INTO mail_folder_mapping_changes (mailbox_account_id, alias, generation, previous_remote_path, remote_path)
		     SELECT mailbox_account_id, alias, generation, $6, remote_path FROM bound
		 )
		 SELECT id FROM bound`,
		accountID, alias, generation, remotePath, delimiter, previousPath).Scan(&b.ID)
	switch {
	case err == nil:
		return b, change, previous, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return Binding{}, 0, nil, fmt.Errorf("mailstore: commit generation %d of alias %q: %w", generation, alias, err)
	}

	// A concurrent run committed this generation first.
	winner, found, err := LatestBinding(ctx, tx, accountID, alias)
	switch {
	case err != nil:
		return Binding{}, 0, nil, fmt.Errorf("mailstore: commit binding: %w", err)
	case !found:
		return Binding{}, 0, nil, conflict("generation %d of alias %q was committed by another run and is not visible to this transaction", generation, alias)
	case winner.RemotePath != remotePath:
		return Binding{}, 0, nil, conflict("generation %d of alias %q is held by a binding naming a different remote folder", winner.Generation, alias)
	}
	winner, err = updateDelimiter(ctx, tx, winner, delimiter)
	return winner, BindingUnchanged, nil, err
}

// updateDelimiter stores the delimiter the server now advertises for an
// unchanged binding.
func updateDelimiter(ctx context.Context, tx pgx.Tx, b Binding, delimiter string) (Binding, error) {
	if b.Delimiter == delimiter {
		return b, nil
	}
	if _, err := tx.Exec(ctx,
		`UPDATE mail_folders SET hierarchy_delimiter = nullif($2, '') WHERE id = $1`,
		b.ID, delimiter); err != nil {
		return Binding{}, fmt.Errorf("mailstore: update the delimiter of alias %q generation %d: %w", b.Alias, b.Generation, err)
	}
	b.Delimiter = delimiter
	return b, nil
}
