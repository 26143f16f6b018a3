package cyrus

import (
	"testing"

	"github.com/mailfathom/mailfathom/internal/testharness/serverproc"
)

var shared serverproc.Shared[*instance]

// Shared returns a view for t of one Cyrus with the default options that
// the whole test binary shares, starting it on first use. It saves a start
// and stop per test at the price of isolation between tests, which
// therefore must:
//
//   - use their own users, from NewUser (AddUser fails for a taken name);
//   - not call Stop or Restart, which fail the test.
//
// The server runs until StopShared, which a TestMain should call after
// m.Run. Without that, Cyrus still stops when the test binary exits
// (master gets SIGTERM as the parent-death signal), but its directory is
// left in the temporary directory.
//
// If the first start failed, every later call fails with the same error.
func Shared(t testing.TB) *Server {
	t.Helper()
	in, err := shared.Get(func() (*instance, error) {
		in, err := newInstance(t.Logf, defaultOptions())
		if err == nil {
			in.shared = true
		}
		return in, err
	})
	if err != nil {
		t.Fatalf("cyrus: shared server: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shared cyrus master output (%s):\n%s", in.params.logFile(), in.logTail(40))
		}
	})
	return &Server{t: t, in: in}
}

// StopShared stops the shared server, if one was started, and removes its
// directory. Later calls to Shared start a new one.
func StopShared() { shared.Stop((*instance).close) }
