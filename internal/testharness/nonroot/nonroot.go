// Package nonroot runs a test again, as an unprivileged user, in a copy of
// its test binary: how a server harness (package dovecot, package cyrus)
// that CI runs as root checks the configuration it writes for a test that
// is not root.
//
//	func TestRunsWithoutRoot(t *testing.T) {
//		if os.Geteuid() != 0 || nonroot.Child() {
//			// the checks, as the current user
//			return
//		}
//		nonroot.Rerun(t)
//	}
package nonroot

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// childEnv marks the copy of a test binary that Rerun starts.
const childEnv = "MAILFATHOM_TESTHARNESS_NONROOT_CHILD"

// Child reports whether this test binary is the copy Rerun started.
func Child() bool { return os.Getenv(childEnv) == "1" }

// Rerun runs t's test alone, verbosely, in a copy of the test binary as
// nobody, and fails t unless that run passes. The copy lies in a new
// directory of mode 0755, since the go test build directory is private to
// root; it runs there with only PATH, HOME (that directory), TMPDIR and
// the variable Child reads in its environment. t must be a top-level
// test.
//
// Precondition: the test runs as root.
func Rerun(t *testing.T) {
	t.Helper()
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)

	dir, err := os.MkdirTemp("", "mfnonroot-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, filepath.Base(exe))
	copyFile(t, exe, bin)

	cmd := exec.Command(bin, "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "TMPDIR=" + os.TempDir(), childEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "test run as nobody:\n%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name())
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
