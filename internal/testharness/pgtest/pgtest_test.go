package pgtest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func scalar[T any](t *testing.T, conn *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, conn.QueryRow(t.Context(), sql, args...).Scan(&v))
	return v
}

// TestParallelTestsGetSeparateDatabases has parallel tests create the same
// table, which would collide in a shared database.
func TestParallelTestsGetSeparateDatabases(t *testing.T) {
	t.Parallel()
	var urls sync.Map
	for i := range 6 {
		t.Run(fmt.Sprint("test", i), func(t *testing.T) {
			t.Parallel()
			url := pgtest.Database(t)
			_, dup := urls.LoadOrStore(url, true)
			require.False(t, dup, "database URL handed out twice: %s", url)
			conn := connect(t, url)
			_, err := conn.Exec(t.Context(), "create table same_name (owner int)")
			require.NoError(t, err)
			_, err = conn.Exec(t.Context(), "insert into same_name values ($1)", i)
			require.NoError(t, err)
			rows, err := conn.Query(t.Context(), "select owner from same_name")
			require.NoError(t, err)
			owners, err := pgx.CollectRows(rows, pgx.RowTo[int])
			require.NoError(t, err)
			require.Equal(t, []int{i}, owners)
		})
	}
}

// TestDatabaseIsDroppedAfterTest checks that a later test does not see an
// earlier test's table and that the earlier database is gone.
func TestDatabaseIsDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var firstName string
	t.Run("first", func(t *testing.T) {
		conn := connect(t, pgtest.Database(t))
		firstName = scalar[string](t, conn, "select current_database()")
		_, err := conn.Exec(t.Context(), "create table marker (x int)")
		require.NoError(t, err)
	})
	t.Run("second", func(t *testing.T) {
		conn := connect(t, pgtest.Database(t))
		require.NotEqual(t, firstName, scalar[string](t, conn, "select current_database()"))
		require.False(t, scalar[bool](t, conn, "select to_regclass('marker') is not null"))
		require.False(t, scalar[bool](t, conn, "select exists (select from pg_database where datname = $1)", firstName),
			"the first test's database is dropped")
	})
}

func TestTemplateDatabaseBuildsOnceAndCopies(t *testing.T) {
	t.Parallel()
	// A key of its own, since templates live as long as the binary and
	// -count may run this test again.
	key := fmt.Sprint("widgets-", time.Now().UnixNano())
	var builds atomic.Int32
	build := func(ctx context.Context, url string) error {
		builds.Add(1)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "create table widget (name text); insert into widget values ('seeded')")
		return err
	}
	t.Run("group", func(t *testing.T) {
		for i := range 5 {
			t.Run(fmt.Sprint("copy", i), func(t *testing.T) {
				t.Parallel()
				conn := connect(t, pgtest.TemplateDatabase(t, key, build))
				require.Equal(t, "seeded", scalar[string](t, conn, "select string_agg(name, ',') from widget"))
				_, err := conn.Exec(t.Context(), "insert into widget values ($1)", fmt.Sprint("mine", i))
				require.NoError(t, err)
				require.Equal(t, 2, scalar[int](t, conn, "select count(*)::int from widget"), "copies are independent")
			})
		}
	})
	require.Equal(t, int32(1), builds.Load())
}

// TestTemplateBuilderMayLeaveConnectionsOpen checks that copies work even
// when the builder forgot to close its connection.
func TestTemplateBuilderMayLeaveConnectionsOpen(t *testing.T) {
	t.Parallel()
	url := pgtest.TemplateDatabase(t, "leaky", func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		_, err = conn.Exec(ctx, "create table leaked (x int)")
		return err // conn stays open
	})
	conn := connect(t, url)
	require.True(t, scalar[bool](t, conn, "select to_regclass('leaked') is not null"))
}

func TestPool(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var one int
	require.NoError(t, pool.QueryRow(t.Context(), "select 1").Scan(&one))
	require.Equal(t, 1, one)
	_, err := pool.Exec(t.Context(), "create table pooled (x int)")
	require.NoError(t, err)
}
