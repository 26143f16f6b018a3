package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMigrate(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool *pgxpool.Pool
	}

	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		t.Cleanup(cancel)
		return ctx, &testBundle{pool: pgtest.Pool(t)}
	}

	t.Run("FreshDatabaseIsNotCurrent", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)

		v, err := schema.Status(ctx, b.pool)
		require.NoError(t, err)
		require.Zero(t, v.Schema)
		require.Zero(t, v.River)
		require.NotZero(t, v.SchemaLatest)
		require.NotZero(t, v.RiverLatest)
		require.False(t, v.Current())
	})

	t.Run("AppliesBothAndIsIdempotent", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)

		v, err := schema.Migrate(ctx, b.pool, nil)
		require.NoError(t, err)
		require.True(t, v.Current(), v.String())

		again, err := schema.Migrate(ctx, b.pool, nil)
		require.NoError(t, err)
		require.Equal(t, v, again)

		for _, table := range []string{"mailbox_accounts", "mail_folders", "stored_emails", "email_message_contents", "synchronization_checkpoints", "river_job"} {
			var exists bool
			require.NoError(t, b.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists))
			require.True(t, exists, table)
		}
	})

	t.Run("ConcurrentReplicasMigrateOnce", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)

		var g errgroup.Group
		for range 3 {
			g.Go(func() error {
				_, err := schema.Migrate(ctx, b.pool, nil)
				return err
			})
		}
		require.NoError(t, g.Wait())
		v, err := schema.Status(ctx, b.pool)
		require.NoError(t, err)
		require.True(t, v.Current(), v.String())
	})

	t.Run("OccurrenceIdentityIsUnique", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		_, err := schema.Migrate(ctx, b.pool, nil)
		require.NoError(t, err)

		var accountID, folderID int64
		require.NoError(t, b.pool.QueryRow(ctx, "INSERT INTO mailbox_accounts (account_key) VALUES ('PRIMARY') RETURNING id").Scan(&accountID))
		require.NoError(t, b.pool.QueryRow(ctx,
			"INSERT INTO mail_folders (mailbox_account_id, alias, generation, remote_path) VALUES ($1, 'INBOX', 1, 'INBOX') RETURNING id",
			accountID).Scan(&folderID))

		insert := func() error {
			_, err := b.pool.Exec(ctx, `INSERT INTO stored_emails (id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability)
				VALUES ($1, $2, $3, 42, 7, 'Available')`, uuid.Must(uuid.NewV7()), accountID, folderID)
			return err
		}
		require.NoError(t, insert())
		err = insert()
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "stored_emails_occurrence_key", pgErr.ConstraintName)

		// A second generation of the alias is a different binding.
		_, err = b.pool.Exec(ctx,
			"INSERT INTO mail_folders (mailbox_account_id, alias, generation, remote_path) VALUES ($1, 'INBOX', 1, 'Other')", accountID)
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "mail_folders_account_alias_generation_key", pgErr.ConstraintName)
	})

	t.Run("RawMimeIsCompressedWithLZ4", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		_, err := schema.Migrate(ctx, b.pool, nil)
		require.NoError(t, err)

		var compression string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT attcompression::text FROM pg_attribute
			WHERE attrelid = 'email_message_contents'::regclass AND attname = 'raw_mime'`).Scan(&compression))
		require.Equal(t, "l", compression)
	})
}
