package cyrus

import (
	"sync"
	"testing"
)

var shared struct {
	mu  sync.Mutex
	in  *instance
	err error
}

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
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.in == nil && shared.err == nil {
		in, err := newInstance(t.Logf, defaultOptions())
		if err != nil {
			shared.err = err
		} else {
			in.shared = true
			shared.in = in
		}
	}
	if shared.err != nil {
		t.Fatalf("cyrus: shared server: %v", shared.err)
	}
	in := shared.in
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shared cyrus master output (%s):\n%s", in.params.logFile(), tail(readFileString(in.params.logFile()), 40))
		}
	})
	return &Server{t: t, in: in}
}

// StopShared stops the shared server, if one was started, and removes its
// directory. Later calls to Shared start a new one.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.in != nil {
		shared.in.close()
	}
	shared.in, shared.err = nil, nil
}
