package cyrus

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

const (
	// readyTimeout bounds how long a start may take before it fails.
	readyTimeout = 20 * time.Second
	// stopGrace is how long master may take to exit after SIGTERM before
	// its process group is killed.
	stopGrace = 2 * time.Second
	// portAttempts is how often a start is retried with new ports when
	// master could not bind the ones picked.
	portAttempts = 5
)

// process is one run of Cyrus's master.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returned
	err    error         // cmd.Wait's error, valid after exited is closed
}

// startProcess starts master in the foreground, its output appended to the
// instance's log, and waits until the plain listener greets as this
// instance and idled has its socket, so that the first IDLE is told of
// changes at once rather than by polling. On failure it returns the
// stopped process, if one was started.
func startProcess(p configParams) (*process, error) {
	// idled makes its socket when it starts; a socket left by an earlier
	// run must not pass for it.
	if err := os.Remove(p.idleSocket()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	proc := &process{exited: make(chan struct{})}
	cmd := exec.Command(p.inst.program("master"), "-C", p.confFile(), "-M", p.masterFile(), "-p", p.pidFile(), "-L", p.logFile())
	cmd.Dir = p.dir
	cmd.Env = p.inst.env()
	// Own process group, so a stop can kill every child, and SIGTERM when
	// the test binary dies, so a crashed test leaves no Cyrus running.
	// Master starts as Cyrus's user: one that dropped to it from root
	// itself would lose the parent-death signal with its credentials.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if p.id.root {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(p.id.uid), Gid: uint32(p.id.gid)}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start master: %w", err)
	}
	proc.cmd = cmd
	go func() {
		proc.err = cmd.Wait()
		close(proc.exited)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := waitReady(ctx, p, proc.exited); err != nil {
		proc.stop()
		if errors.Is(err, errExited) {
			err = fmt.Errorf("%w (%v)", err, proc.err)
		}
		return proc, err
	}
	return proc, nil
}

// errExited reports that master exited while a start waited for it.
var errExited = errors.New("cyrus master exited during start-up")

func waitReady(ctx context.Context, p configParams, exited <-chan struct{}) error {
	var lastErr error
	for delay := 2 * time.Millisecond; ; delay = min(delay*2, 50*time.Millisecond) {
		select {
		case <-exited:
			return errExited
		default:
		}
		lastErr = probe(ctx, p.plainAddr, p.greeting())
		if lastErr == nil {
			if _, err := os.Stat(p.idleSocket()); err == nil {
				return nil
			}
			lastErr = errors.New("idled has no socket yet")
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("cyrus not ready at %s after %v: %w", p.plainAddr, readyTimeout, lastErr)
		case <-time.After(delay):
		}
	}
}

// probe dials addr and checks that its greeting carries greeting.
func probe(ctx context.Context, addr, greeting string) error {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read greeting: %w", err)
	}
	_, _ = conn.Write([]byte("x LOGOUT\r\n"))
	if !strings.HasPrefix(line, "* OK [CAPABILITY ") || !strings.Contains(line, greeting) {
		return fmt.Errorf("another server answers at %s: %q", addr, strings.TrimSpace(line))
	}
	return nil
}

// stop sends SIGTERM to master's process group (master then ends its
// children, whose clients see their connections close), waits up to
// stopGrace for master to exit and kills whatever is left of the group. It
// is idempotent.
func (p *process) stop() {
	pid := p.cmd.Process.Pid
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
		}
	}
	// ESRCH is expected when everything exited already.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-p.exited
}

// freeAddrs returns one host:port per host, each with a port that was free
// a moment ago; all are held open together so no two are the same.
// Another process may take a port before master binds it; callers retry.
func freeAddrs(hosts ...string) ([]string, error) {
	var addrs []string
	for _, host := range hosts {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// exUnavailable is the status master exits with when it cannot bind a
// listener (master_bind_errors_fatal); it says so only to syslog.
const exUnavailable = 69

// bindFailed reports whether p, which ended during start-up, could not
// bind a listener.
func (p *process) bindFailed() bool {
	select {
	case <-p.exited:
	default:
		return false
	}
	var exit *exec.ExitError
	return errors.As(p.err, &exit) && exit.ExitCode() == exUnavailable
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

func readFileString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}
