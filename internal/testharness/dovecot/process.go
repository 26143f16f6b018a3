package dovecot

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/mailfathom/mailfathom/internal/testharness/serverproc"
)

// stopGrace is how long the master may take to exit after SIGTERM before
// its process group is killed. SIGTERM reaches every process of the group
// at once, and imap processes still send "* BYE Server shutting down." to
// their clients.
//
// The grace is short on purpose: while shutting down, Dovecot 2.3's master
// sleeps whole seconds in a loop before reaping children it signalled
// (measured: 1 s often, 6 s once), and nothing is left for it to do by then.
const stopGrace = 100 * time.Millisecond

// startProcess starts `dovecot -F -c conf`, its output appended to
// outputFile, and waits until the plain listener at probeAddr greets with
// its capabilities and greeting, which happens only after the auth process
// is up. A greeting with another text comes from a process that took the
// port first; the master then exits on its bind error and the caller
// retries with other ports. On failure it returns the stopped process, if
// one was started.
func startProcess(binary, conf, dir, outputFile, probeAddr, greeting string) (*serverproc.Process, error) {
	out, err := os.OpenFile(outputFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(binary, "-F", "-c", conf)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TZ=UTC"}
	cmd.Stdout = out
	cmd.Stderr = out
	own := func(line string) bool { return strings.HasSuffix(line, "] "+greeting) }
	return serverproc.Start(cmd, stopGrace, func(ctx context.Context) error {
		return serverproc.Probe(ctx, probeAddr, own)
	})
}

// isBindError reports whether Dovecot's output says a listener's port was
// taken.
func isBindError(output string) bool {
	return strings.Contains(output, "Address already in use")
}
