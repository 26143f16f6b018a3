package mailstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// An account run records, per configured alias, what it resolved the alias
// to: the binding it committed, or why it resolved to no folder. That is
// what a push account's watch watches — only what the latest run resolved,
// so a folder deleted on the server, or the old folder of a repointed
// alias, is left alone — and what status shows of an alias nobody watches.
// The account's resolutions version counts the runs whose resolutions
// differed from the previous run's, so a watch learns of a change by
// polling one number (ResolutionVersions).

// Resolution is what a run resolved one alias to: BindingID is the binding
// it committed, or Failure the identity of why it resolved the alias to no
// folder (folders.Identity). Exactly one of them is set.
type Resolution struct {
	Alias     string
	BindingID int64
	Failure   string
}

// RecordResolutions records, in the account run's transaction, what the
// run resolved each alias of accountKey to, and reports whether that
// differs from what the previous run recorded; when it does, the
// account's resolutions version is incremented. An alias the run did not
// resolve keeps no binding, whatever an earlier run resolved it to.
func RecordResolutions(ctx context.Context, tx pgx.Tx, accountKey string, rs []Resolution) (changed bool, err error) {
	aliases := make([]string, len(rs))
	bindings := make([]*int64, len(rs))
	failures := make([]*string, len(rs))
	for i, r := range rs {
		if strings.TrimSpace(r.Alias) == "" || (r.BindingID == 0) == (r.Failure == "") {
			return false, errors.New("mailstore: a resolution names an alias and either its binding or its failure")
		}
		aliases[i] = r.Alias
		if r.BindingID != 0 {
			bindings[i] = &r.BindingID
		} else {
			failures[i] = &r.Failure
		}
	}
	var n int
	err = tx.QueryRow(ctx, `
		WITH recorded AS (
			INSERT INTO folder_states AS s (account_key, alias, resolved_binding_id, resolution_failure)
			SELECT $1, t.alias, t.binding_id, t.failure
			FROM unnest($2::text[], $3::bigint[], $4::text[]) AS t(alias, binding_id, failure)
			ON CONFLICT (account_key, alias) DO UPDATE
			SET resolved_binding_id = excluded.resolved_binding_id, resolution_failure = excluded.resolution_failure
			WHERE s.resolved_binding_id IS DISTINCT FROM excluded.resolved_binding_id
			   OR s.resolution_failure IS DISTINCT FROM excluded.resolution_failure
			RETURNING 1
		)
		SELECT count(*) FROM recorded`, accountKey, aliases, bindings, failures).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("mailstore: record a run's resolutions: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO account_states AS a (account_key, resolutions_version) VALUES ($1, 1)
		ON CONFLICT (account_key) DO UPDATE SET resolutions_version = a.resolutions_version + 1`, accountKey); err != nil {
		return false, fmt.Errorf("mailstore: record a run's resolutions: %w", err)
	}
	return true, nil
}

// ResolvedFolders is what the latest run of an account recorded of some
// of its aliases.
type ResolvedFolders struct {
	// Version is the account's resolutions version as of the same read; 0
	// when no run has recorded resolutions yet.
	Version int64
	// Bindings holds, by alias, the binding the latest run resolved it to.
	Bindings map[string]Binding
	// Unresolved holds, by alias, the identity of why the latest run
	// resolved it to no folder.
	Unresolved map[string]string
}

// ReadResolvedFolders returns what the latest run of accountKey resolved
// each of aliases to, with the account's resolutions version, in one
// statement, so in one snapshot: a run's resolutions are seen whole or not
// at all. An alias no run has recorded is in neither map.
func ReadResolvedFolders(ctx context.Context, q Querier, accountKey string, aliases []string) (ResolvedFolders, error) {
	rows, err := q.Query(ctx, `
		SELECT v.version, s.alias, s.resolution_failure,
		       b.id, b.mailbox_account_id, b.alias, b.generation, b.remote_path, coalesce(b.hierarchy_delimiter, '')
		FROM (SELECT coalesce(max(resolutions_version), 0) AS version FROM account_states WHERE account_key = $1) v
		LEFT JOIN folder_states s ON s.account_key = $1 AND s.alias = ANY($2)
		     AND (s.resolved_binding_id IS NOT NULL OR s.resolution_failure IS NOT NULL)
		LEFT JOIN mail_folders b ON b.id = s.resolved_binding_id`, accountKey, aliases)
	if err != nil {
		return ResolvedFolders{}, fmt.Errorf("mailstore: read the resolved folders: %w", err)
	}
	defer rows.Close()
	out := ResolvedFolders{Bindings: map[string]Binding{}, Unresolved: map[string]string{}}
	for rows.Next() {
		var (
			alias, failure *string
			id, accountID  *int64
			balias, path   *string
			generation     *int
			delimiter      *string
		)
		if err := rows.Scan(&out.Version, &alias, &failure, &id, &accountID, &balias, &generation, &path, &delimiter); err != nil {
			return ResolvedFolders{}, fmt.Errorf("mailstore: read the resolved folders: %w", err)
		}
		switch {
		case alias == nil:
		case failure != nil:
			out.Unresolved[*alias] = *failure
		case id != nil:
			out.Bindings[*alias] = Binding{ID: *id, AccountID: *accountID, Alias: *balias, Generation: *generation, RemotePath: *path, Delimiter: *delimiter}
		}
	}
	if err := rows.Err(); err != nil {
		return ResolvedFolders{}, fmt.Errorf("mailstore: read the resolved folders: %w", err)
	}
	return out, nil
}

// ResolutionVersions returns the resolutions version of each of
// accountKeys that has one recorded, in one statement, however many
// accounts it names.
func ResolutionVersions(ctx context.Context, q Querier, accountKeys []string) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT account_key, resolutions_version FROM account_states WHERE account_key = ANY($1)`, accountKeys)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the resolutions versions: %w", err)
	}
	out := map[string]int64{}
	var (
		key     string
		version int64
	)
	_, err = pgx.ForEachRow(rows, []any{&key, &version}, func() error {
		out[key] = version
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the resolutions versions: %w", err)
	}
	return out, nil
}
