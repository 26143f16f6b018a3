package cyrus_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
)

// nonRootChildEnv marks the copy of this test binary that
// TestRunsWithoutRoot starts as an unprivileged user.
const nonRootChildEnv = "MAILFATHOM_CYRUS_NONROOT_CHILD"

// TestRunsWithoutRoot checks the configuration for a test that is not
// root, in which Cyrus runs as the current user and reads the packages a
// root run unpacked: directly when the test is not root, otherwise by
// running a copy of this test binary as nobody.
func TestRunsWithoutRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 || os.Getenv(nonRootChildEnv) == "1" {
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

	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)

	// The go test build directory is private to root: run a copy.
	dir, err := os.MkdirTemp("", "mfcyrus-nonroot-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, "cyrus.test")
	copyFile(t, exe, bin)

	cmd := exec.Command(bin, "-test.run=^TestRunsWithoutRoot$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "TMPDIR=" + os.TempDir(), nonRootChildEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "test run as nobody:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestRunsWithoutRoot")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
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
	require.Eventually(t, func() bool { return len(serving()) == 0 }, 10*time.Second, 50*time.Millisecond,
		"processes of the child's server outlived it: %v", serving())
}
