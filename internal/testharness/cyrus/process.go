package cyrus

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/mailfathom/mailfathom/internal/testharness/serverproc"
)

// stopGrace is how long master may take to exit after SIGTERM before its
// process group is killed. Master ends its children on SIGTERM, whose
// clients then see their connections close.
const stopGrace = 2 * time.Second

// startProcess starts master in the foreground, its output appended to the
// instance's log, and waits until the plain listener greets as this
// instance and idled has its socket, so that the first IDLE is told of
// changes at once rather than by polling. On failure it returns the
// stopped process, if one was started.
func startProcess(p configParams) (*serverproc.Process, error) {
	// idled makes its socket when it starts; a socket left by an earlier
	// run must not pass for it.
	if err := os.Remove(p.idleSocket()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	cmd := exec.Command(p.inst.program("master"), "-C", p.confFile(), "-M", p.masterFile(), "-p", p.pidFile(), "-L", p.logFile())
	cmd.Dir = p.dir
	cmd.Env = p.inst.env()
	// Master starts as Cyrus's user: one that dropped to it from root
	// itself would lose the parent-death signal with its credentials.
	if p.id.root {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(p.id.uid), Gid: uint32(p.id.gid)}}
	}
	return serverproc.Start(cmd, stopGrace, func(ctx context.Context) error {
		if err := serverproc.Probe(ctx, p.plainAddr, p.ownGreeting); err != nil {
			return err
		}
		if _, err := os.Stat(p.idleSocket()); err != nil {
			return errors.New("idled has no socket yet")
		}
		return nil
	})
}

// exUnavailable is the status master exits with when it cannot bind a
// listener (master_bind_errors_fatal); it says so only to syslog.
const exUnavailable = 69

// bindFailed reports whether a start that failed with err, having started
// proc, failed because a port was taken: master could not bind it, or
// another server answers on it.
func bindFailed(proc *serverproc.Process, err error) bool {
	return proc != nil && proc.ExitCode() == exUnavailable || errors.Is(err, serverproc.ErrAnotherServer)
}
