package dovecot

import (
	"testing"

	"github.com/mailfathom/mailfathom/internal/testharness/serverproc"
)

var shared serverproc.Shared[*instance]

// Shared returns a view for t of one Dovecot with the default options that
// the whole test binary shares, starting it on first use. It saves the
// start and stop of a server per test (50–110 ms measured here) at the
// price of isolation between tests, which therefore must:
//
//   - use their own users, from NewUser (AddUser fails for a taken name);
//   - not call Stop or Restart, which fail the test;
//   - not look for their own lines in Log without filtering by user.
//
// The server runs until StopShared, which a TestMain should call after
// m.Run. Without that, Dovecot still stops when the test binary exits (its
// master gets SIGTERM as the parent-death signal), but its directory is
// left in the temporary directory.
//
// If the first start failed, every later call fails with the same error.
func Shared(t testing.TB) *Server {
	t.Helper()
	in := serverproc.UseShared(t, &shared, "dovecot", func() (*instance, error) {
		return newInstance(t.Logf, defaultOptions())
	})
	return &Server{t: t, in: in}
}

// StopShared stops the shared server, if one was started, and removes its
// directory. Later calls to Shared start a new one.
func StopShared() { shared.Stop((*instance).Close) }
