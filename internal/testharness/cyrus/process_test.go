package cyrus_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
	"github.com/mailfathom/mailfathom/internal/testharness/nonroot"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// TestRunsWithoutRoot checks the configuration for a test that is not
// root, in which Cyrus runs as the current user and reads the packages a
// root run unpacked: directly when the test is not root, otherwise by
// running a copy of this test binary as nobody.
func TestRunsWithoutRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 || nonroot.Child() {
		s := cyrus.Start(t)
		u := s.AddUser("unprivileged", "pw")
		uid := u.Append("INBOX", message(1), time.Time{}, imap.FlagSeen)
		require.Equal(t, []imap.Flag{imap.FlagSeen}, u.Flags("INBOX", uid))
		u.Dial()
		st, err := os.Stat(filepath.Join(s.Dir(), "conf", "mailboxes.db"))
		require.NoError(t, err)
		require.Equal(t, uint32(os.Geteuid()), st.Sys().(*syscall.Stat_t).Uid)
		return
	}
	cyrus.Shared(t) // unpacks the packages as root, if no run did yet
	nonroot.Rerun(t)
}

// exitChildEnv marks the copy of this test binary that
// TestMasterEndsWithItsTestBinary starts.
const exitChildEnv = "MAILFATHOM_CYRUS_EXIT_CHILD"

// TestMasterEndsWithItsTestBinary: a test binary that exits without
// stopping its shared server (a TestMain that cannot call StopShared, or a
// crash) takes Cyrus down with it: no process of that server is left.
func TestMasterEndsWithItsTestBinary(t *testing.T) {
	if os.Getenv(exitChildEnv) == "1" {
		s := cyrus.Shared(t)
		s.NewUser().Dial()
		fmt.Printf("instance directory: %s\n", s.Dir())
		os.Exit(0)
	}
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestMasterEndsWithItsTestBinary$", "-test.count=1")
	cmd.Env = append(os.Environ(), exitChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	_, dir, ok := strings.Cut(strings.TrimSpace(string(out)), "instance directory: ")
	require.True(t, ok, "%s", out)
	t.Cleanup(func() { os.RemoveAll(dir) })

	serving := func() []string {
		var pids []string
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if cmdline, err := os.ReadFile(p); err == nil && strings.Contains(string(cmdline), dir+"/") {
				pids = append(pids, p)
			}
		}
		return pids
	}
	poll.Until(t, 10*time.Second, "no process of the child's server outlives it", func() (bool, string) {
		left := serving()
		return len(left) == 0, fmt.Sprintf("%v", left)
	})
}
