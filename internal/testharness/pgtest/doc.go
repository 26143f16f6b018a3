// Package pgtest gives tests a PostgreSQL database of their own.
//
// Each test binary that uses it starts one private cluster (see
// internal/pgcluster), lazily on the first call, so packages that never touch
// the database pay nothing; every test then gets a fresh database in it,
// dropped when the test ends:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		pool := pgtest.Pool(t) // or url := pgtest.Database(t)
//		...
//	}
//
// TemplateDatabase builds a database once per binary (for example by applying
// the migrations) and gives each test a copy of it.
//
// The cluster is not durable (fsync off): it is thrown away with the binary.
// Its files live in <base>/mailfathom-pgtest-<uid>/run-*, where <base> is
// $MAILFATHOM_PGTEST_DIR if set, else /dev/shm if it is a tmpfs with 2 GiB
// free, else os.TempDir(). A binary that is killed leaves its server
// running; the next binary that starts a cluster under the same base stops
// it and removes its directory. A freshly initialised data directory is kept
// there too (seed-*) and copied for each binary, which is faster than
// running initdb each time.
//
// A cluster that cannot start fails the calling test with the reason; pgtest
// never skips. When PostgreSQL is not installed and the tests run as root on
// Debian, sysdeps.Ensure installs it first.
package pgtest
