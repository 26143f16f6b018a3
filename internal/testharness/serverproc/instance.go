package serverproc

import (
	"os"
	"testing"
)

// Instance is what every server harness keeps of one server instance
// beside its configuration: the Supervisor of its process, the directory
// Close removes, the log whose tail a failed test shows, and whether the
// test binary shares the instance. A harness's instance type embeds it
// and fills in the fields before the first start.
type Instance struct {
	Supervisor
	// Name is the server's name, which the messages begin with: "dovecot".
	Name string
	// Dir is the instance directory.
	Dir string
	// LogFile is the path of the server's log, and LogName what the
	// output of a failed test calls its tail: "log tail".
	LogFile, LogName string

	shared bool // started by UseShared
}

// instance gives UseShared the Instance a harness's instance type embeds.
func (in *Instance) instance() *Instance { return in }

// Close stops the server if it runs and removes its directory.
func (in *Instance) Close() {
	in.Stop()
	os.RemoveAll(in.Dir)
}

// LogTail returns the last lines of the log.
func (in *Instance) LogTail(lines int) string { return Tail(ReadLog(in.LogFile), lines) }

// CloseAfter closes the instance in the cleanup of t, the test that
// started it, after logging the tail of its log if t failed.
func (in *Instance) CloseAfter(t testing.TB) {
	t.Cleanup(func() {
		in.logIfFailed(t, "")
		in.Close()
	})
}

// MustOwn fails t if the instance is shared: op, such as "Stop", would
// disturb the other tests using it.
func (in *Instance) MustOwn(t testing.TB, op string) {
	t.Helper()
	if in.shared {
		t.Fatalf("%s: %s on the shared server would disturb other tests; use Start", in.Name, op)
	}
}

// logIfFailed logs the tail of the log, its caption led by prefix, if t
// failed.
func (in *Instance) logIfFailed(t testing.TB, prefix string) {
	if t.Failed() {
		t.Logf("%s%s %s (%s):\n%s", prefix, in.Name, in.LogName, in.LogFile, in.LogTail(40))
	}
}

// UseShared returns s's server for t, starting it with start on first
// use (see Shared.Get) and marking it shared, so that MustOwn fails. It
// fails t if that start failed, naming the server by name, and logs the
// tail of the server's log in the cleanup of a t that failed. It never
// closes the server: that is Shared.Stop's. T is a harness's instance
// type, which embeds Instance.
func UseShared[T interface{ instance() *Instance }](t testing.TB, s *Shared[T], name string, start func() (T, error)) T {
	t.Helper()
	in, err := s.Get(func() (T, error) {
		in, err := start()
		if err == nil {
			in.instance().shared = true
		}
		return in, err
	})
	if err != nil {
		t.Fatalf("%s: shared server: %v", name, err)
	}
	t.Cleanup(func() { in.instance().logIfFailed(t, "shared ") })
	return in
}
