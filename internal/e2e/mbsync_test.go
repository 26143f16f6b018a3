package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
)

// mbsyncRun is what one mbsync pull of a folder measured.
type mbsyncRun struct {
	elapsed         time.Duration
	client, dovecot time.Duration // CPU time
}

func (r mbsyncRun) String() string {
	return fmt.Sprintf("%.2f s; CPU: mbsync %.2f s, Dovecot %.2f s", r.elapsed.Seconds(), r.client.Seconds(), r.dovecot.Seconds())
}

// mbsyncPath returns mbsync's path, or "" with the reason it is missing
// logged, so a benchmark on a machine without it still measures
// MailFathom.
func mbsyncPath(b *testing.B) string {
	path, err := exec.LookPath("mbsync")
	if err != nil {
		b.Logf("mbsync is not installed, so no comparison in this run; install it (Debian: apt-get install isync) and run again")
		return ""
	}
	return path
}

// runMbsync pulls folder of u into a fresh Maildir with mbsync over the
// server's implicit-TLS listener (at port on the loopback address: the
// server's own, or a proxy's in front of it), with its defaults (COMPRESS=DEFLATE when
// the server offers it) or with COMPRESS disabled, and measures the time
// and the CPU that mbsync and Dovecot spent. mbsync only reads: Sync Pull
// with no expunge and no flag propagation to the server.
func runMbsync(b *testing.B, path string, bundle *testBundle, u *dovecot.User, folder string, n, port int, compress bool) mbsyncRun {
	b.Helper()
	dir := b.TempDir()
	rc := filepath.Join(dir, "mbsyncrc")
	disable := ""
	if !compress {
		disable = "DisableExtensions COMPRESS=DEFLATE\n"
	}
	// mbsync matches the certificate by name only, and the test
	// certificate names the loopback address "localhost".
	conf := fmt.Sprintf(`IMAPAccount bench
Host %s
Port %d
User %s
Pass %s
SSLType IMAPS
CertificateFile %s
%s
IMAPStore far
Account bench

MaildirStore near
Path %s/
Inbox %s/inbox

Channel bench
Far :far:
Near :near:
Patterns %s
Create Near
Sync Pull
SyncState *
`, "localhost", port, u.Name(), strconv.Quote(u.Password()), bundle.caFile, disable, dir, dir, folder)
	require.NoError(b, os.WriteFile(rc, []byte(conf), 0o600))

	master, err := pidFile(filepath.Join(bundle.server.Dir(), "run", "master.pid"))
	require.NoError(b, err)
	dovecot0, err := treeCPU(master)
	require.NoError(b, err)
	cmd := exec.Command(path, "-q", "-c", rc, "bench")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	require.NoError(b, err, "mbsync: %s", out)
	dovecot1, err := treeCPU(master)
	require.NoError(b, err)

	pulled := 0
	for _, sub := range []string{"new", "cur"} {
		entries, err := os.ReadDir(filepath.Join(dir, "inbox", sub))
		require.NoError(b, err)
		pulled += len(entries)
	}
	require.Equal(b, n, pulled, "mbsync pulled every message")
	return mbsyncRun{
		elapsed: elapsed,
		client:  cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(),
		dovecot: dovecot1 - dovecot0,
	}
}
