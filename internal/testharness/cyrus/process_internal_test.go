package cyrus

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPortTakenByAnotherProcess: a restart whose port another process
// took fails, saying master could not bind (it tells only syslog, by its
// exit status); a first start in the same situation moves to other ports.
func TestPortTakenByAnotherProcess(t *testing.T) {
	t.Parallel()
	in, err := newInstance(t.Logf, defaultOptions())
	require.NoError(t, err)
	t.Cleanup(in.close)
	in.stop()
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
		addrs, err := freeAddrs(hosts...)
		if first && err == nil {
			first = false
			addrs[1] = taken
		}
		return addrs, err
	}
	require.NoError(t, in.start(true))
	require.NotEqual(t, taken, in.params.tlsAddr)
	require.NoError(t, probe(t.Context(), in.params.plainAddr, in.params.greeting()))
}

// TestSweepAbandonedDirectories: an instance directory whose test process
// has ended is removed when the next one is made; one of a running
// process, or one not yet given its owner, is kept.
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
		require.NoError(t, os.Mkdir(dir, 0o755))
		if owner != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o644))
		}
	}
	sweepAbandoned(parent)
	require.NoDirExists(t, filepath.Join(parent, "mfcyrus-ended"))
	require.DirExists(t, filepath.Join(parent, "mfcyrus-running"))
	require.DirExists(t, filepath.Join(parent, "mfcyrus-new"))
}
