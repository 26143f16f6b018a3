package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestMutateAndMutationsCommands records changes with `mailfathom mutate`
// and lists them with `mailfathom mutations`; the serving process that
// carries them out is tested in workers and e2e.
func TestMutateAndMutationsCommands(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := dbtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()

	accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
		if err != nil {
			return err
		}
		_, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, "ARCHIVE", "Archive", "/")
		return err
	}))
	inbox, _, err := mailstore.LatestBinding(ctx, pool, accountID, "INBOX")
	require.NoError(t, err)
	id, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: inbox.ID, UIDValidity: 1, UID: 1,
		Size: 10, Raw: []byte("x"), Availability: mailstore.Available})
	require.NoError(t, err)

	pw := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pw, []byte("x"), 0o600))
	env := []string{
		"MAILFATHOM_DATABASE_URL=" + url,
		"MAILFATHOM_UI_ENABLED=false",
		"MAILFATHOM_ACCOUNTS_0_ID=primary",
		"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME=user",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=file:" + pw,
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS=inbox",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH=INBOX",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS=archive",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH=Archive",
	}
	jobs := func() int { return dbassert.JobCount(t, pool, "mutation_stage") }

	code, stdout, stderr := runCmd(t, env, "mutate", "-request-id", "k1", "move", id.String(), "archive")
	require.Equal(t, 0, code, stderr)
	fields := strings.Fields(stdout)
	require.Len(t, fields, 3)
	require.Equal(t, "pending", fields[1])
	require.Equal(t, "recorded", fields[2])
	require.Equal(t, 1, jobs(), "the first stage's job is recorded with the mutation")

	// The same request again is the same change.
	code, again, stderr := runCmd(t, env, "mutate", "-request-id", "k1", "move", id.String(), "archive")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, fields[0], strings.Fields(again)[0])
	require.Contains(t, again, "already recorded")
	require.Equal(t, 1, jobs())

	// Refusals record nothing.
	for _, tc := range []struct {
		args   []string
		reason string
	}{
		{[]string{"-request-id", "k1", "delete", id.String()}, "RequestIdReused"},
		{[]string{"move", id.String()}, "DestinationRequired"},
		{[]string{"move", id.String(), "inbox"}, "DestinationIsSource"},
		{[]string{"move", id.String(), "nowhere"}, "DestinationAliasUnknown"},
		{[]string{"delete", id.String(), "archive"}, "DestinationNotExpected"},
		{[]string{"move", "0190a5c4-0000-7000-8000-000000000000", "archive"}, "EmailUnknown"},
		{[]string{"archive", id.String()}, "MutationKindUnknown"},
	} {
		code, _, stderr := runCmd(t, env, append([]string{"mutate"}, tc.args...)...)
		require.Equal(t, 1, code, tc.args)
		require.Contains(t, stderr, "["+tc.reason+"]", tc.args)
	}
	require.Equal(t, 1, jobs())

	code, _, _ = runCmd(t, env, "mutate", "move")
	require.Equal(t, 2, code)

	code, _, stderr = runCmd(t, env, "mutate", "mark-read", id.String())
	require.Equal(t, 0, code, stderr)
	code, stdout, stderr = runCmd(t, env, "mutations", "-state", "pending")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, fields[0])
	require.Contains(t, stdout, "mark-read")
	require.Contains(t, stdout, "INBOX")
	require.Contains(t, stdout, "ARCHIVE")
	code, stdout, stderr = runCmd(t, env, "mutations", "-account", "primary", "-state", "dead-lettered")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "no mutations")
	code, _, _ = runCmd(t, env, "mutations", "-state", "stuck")
	require.Equal(t, 2, code)

	// Asked again once the email is no longer served, a recorded request
	// is answered with its change, not refused.
	dbassert.MarkExpunged(t, pool, id)
	code, again, stderr = runCmd(t, env, "mutate", "-request-id", "k1", "move", id.String(), "archive")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, fields[0], strings.Fields(again)[0])
	require.Contains(t, again, "already recorded")
	code, _, stderr = runCmd(t, env, "mutate", "-request-id", "k9", "move", id.String(), "archive")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "[EmailNoLongerServed]")

	// The move, carried by a server that named no placement, lists as
	// completed and unjoined.
	moveID, err := uuid.Parse(fields[0])
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := mailstore.AdvanceMutation(ctx, tx, moveID, mailstore.StageRecorded,
			mailstore.MutationAdvance{Stage: mailstore.StagePlacementIssued, Path: mailstore.PathMove}, time.Now()); err != nil {
			return err
		}
		return mailstore.AdvanceMutation(ctx, tx, moveID, mailstore.StagePlacementIssued, mailstore.MutationAdvance{Stage: mailstore.StageCompleted}, time.Now())
	}))
	code, stdout, stderr = runCmd(t, env, "mutations", "-state", "completed")
	require.Equal(t, 0, code, stderr)
	var line string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, fields[0]) {
			line = l
		}
	}
	require.Contains(t, line, "completed, unjoined", stdout)
}
