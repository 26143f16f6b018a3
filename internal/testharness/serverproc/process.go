package serverproc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// ReadyTimeout bounds how long Start waits for a server to become ready.
const ReadyTimeout = 20 * time.Second

// ErrExited reports that a server's process exited while Start waited for
// it to become ready.
var ErrExited = errors.New("server exited during start-up")

// Process is one run of a server's master process.
type Process struct {
	cmd     *exec.Cmd
	grace   time.Duration
	exited  chan struct{} // closed when cmd.Wait returned
	err     error         // cmd.Wait's error, valid after exited is closed
	startup time.Duration
}

// Start starts cmd in a process group of its own, with SIGTERM as its
// parent-death signal, so that Stop ends every process the server started
// and a test binary that crashes or is killed leaves no server running.
// It keeps the rest of cmd.SysProcAttr, such as a Credential; a process
// that changes its own credentials later loses the parent-death signal,
// so a server that is to run as another user must be started as that user.
//
// Start then calls ready, at intervals growing from 2 to 50 ms, until it
// returns nil, the process exits (ErrExited, with the exit status) or
// ReadyTimeout passes (the last error of ready). On failure it returns the
// stopped process, if one was started, whose ExitCode a caller may read;
// otherwise the running process. grace is how long Stop lets the process
// exit after SIGTERM before it kills the process group.
//
// Start does not capture the process's output: cmd.Stdout and cmd.Stderr
// are the caller's. A file is better than a pipe there, since cmd.Wait,
// and so ErrExited, waits for every process that inherited a pipe.
func Start(cmd *exec.Cmd, grace time.Duration, ready func(ctx context.Context) error) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &Process{cmd: cmd, grace: grace, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if err := p.waitReady(ctx, ready); err != nil {
		p.Stop()
		if errors.Is(err, ErrExited) {
			err = fmt.Errorf("%w (%v)", err, p.err)
		}
		return p, err
	}
	p.startup = time.Since(begin)
	return p, nil
}

func (p *Process) waitReady(ctx context.Context, ready func(ctx context.Context) error) error {
	var lastErr error
	for delay := 2 * time.Millisecond; ; delay = min(delay*2, 50*time.Millisecond) {
		select {
		case <-p.exited:
			return ErrExited
		default:
		}
		if lastErr = ready(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-p.exited:
			return ErrExited
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %w", ReadyTimeout, lastErr)
		case <-time.After(delay):
		}
	}
}

// Stop sends SIGTERM to the process group, so that every process of the
// server gets it at once, gives the master process its grace to exit, and
// then kills whatever is left of the group. It is idempotent.
func (p *Process) Stop() {
	pid := p.cmd.Process.Pid
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(p.grace):
		}
	}
	// ESRCH is expected when everything exited already.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-p.exited
}

// ExitCode returns the master process's exit status once it has exited,
// and -1 while it runs or when a signal ended it.
func (p *Process) ExitCode() int {
	select {
	case <-p.exited:
	default:
		return -1
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err == nil {
		return 0
	}
	return -1
}
