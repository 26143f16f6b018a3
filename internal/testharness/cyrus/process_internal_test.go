package cyrus

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/serverproc"
)

// TestPortTakenByAnotherProcess: a restart whose port another process
// took fails, saying master could not bind (it tells only syslog, by its
// exit status); a first start in the same situation moves to other ports.
func TestPortTakenByAnotherProcess(t *testing.T) {
	t.Parallel()
	in, err := newInstance(t.Logf, defaultOptions())
	require.NoError(t, err)
	t.Cleanup(in.Close)
	in.Stop()
	ln, err := net.Listen("tcp", in.params.tlsAddr)
	require.NoError(t, err)
	defer ln.Close()

	err = in.start(false)
	require.ErrorContains(t, err, "could not bind free ports in 1 attempts")

	// A first start retries: simulate the race by handing the taken port
	// to the attempt that picks ports, once.
	taken := in.params.tlsAddr
	in.params.plainAddr, in.params.tlsAddr = "", ""
	first := true
	in.pickAddrs = func(hosts ...string) ([]string, error) {
		addrs, err := serverproc.FreeAddrs(hosts...)
		if first && err == nil {
			first = false
			addrs[1] = taken
		}
		return addrs, err
	}
	require.NoError(t, in.start(true))
	require.NotEqual(t, taken, in.params.tlsAddr)
	require.NoError(t, serverproc.Probe(t.Context(), in.params.plainAddr, in.params.ownGreeting))
}

// TestSweepAbandonedDirectories: an instance directory whose test process
// has ended is removed when the next one is made, and a master still
// serving it is killed; one of a running process, or one not yet given
// its owner, is kept.
func TestSweepAbandonedDirectories(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	ended := exec.Command("true")
	require.NoError(t, ended.Run())
	for name, owner := range map[string]string{
		"mfcyrus-ended":   strconv.Itoa(ended.Process.Pid),
		"mfcyrus-running": strconv.Itoa(os.Getpid()),
		"mfcyrus-new":     "",
	} {
		dir := filepath.Join(parent, name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "conf"), 0o755))
		if owner != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o644))
		}
	}
	// A stand-in for a master left serving the ended test's directory:
	// its command line names the directory, as master's does.
	abandoned := filepath.Join(parent, "mfcyrus-ended")
	left := exec.Command("sh", "-c", "sleep 60; exit 0", filepath.Join(abandoned, "imapd.conf"))
	left.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, left.Start())
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	require.NoError(t, os.WriteFile(filepath.Join(abandoned, "conf", "master.pid"), []byte(strconv.Itoa(left.Process.Pid)+"\n"), 0o644))

	sweepAbandoned(parent)
	require.NoDirExists(t, abandoned)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = left.Process.Kill()
		t.Fatal("the master left serving an abandoned directory still runs")
	}
	require.DirExists(t, filepath.Join(parent, "mfcyrus-running"))
	require.DirExists(t, filepath.Join(parent, "mfcyrus-new"))
}
