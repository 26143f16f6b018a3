package dovecot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	// readyTimeout bounds how long a start may take before it fails.
	readyTimeout = 20 * time.Second
	// stopGrace is how long the master may take to exit after SIGTERM
	// before its process group is killed; see process.stop.
	stopGrace = 100 * time.Millisecond
	// portAttempts is how often a start is retried with new ports when
	// Dovecot could not bind the ones picked.
	portAttempts = 5
)

// process is one run of the Dovecot master.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returned
	output string        // path of the file holding stdout and stderr
	err    error         // cmd.Wait's error, valid after exited is closed
}

// startProcess starts `dovecot -F -c conf` and waits until the plain
// listener at probeAddr greets with its capabilities and greeting, which
// happens only after the auth process is up. A greeting with another text
// comes from a process that took the port first; the master then exits
// on its bind error and the caller retries with other ports. On failure it returns the stopped process,
// if one was started, for its output.
func startProcess(binary, conf, dir, probeAddr, greeting string) (*process, error) {
	p := &process{exited: make(chan struct{}), output: filepath.Join(dir, "dovecot.out")}
	// A file, not a pipe, so that exec.Cmd.Wait returns when the master
	// exits rather than when every process that inherited the pipe has
	// closed it.
	out, err := os.OpenFile(p.output, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(binary, "-F", "-c", conf)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TZ=UTC"}
	cmd.Stdout = out
	cmd.Stderr = out
	// Own process group, so a stop can kill every child, and SIGTERM
	// when the test binary dies, so a crashed or killed test does not leave
	// Dovecot running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p.cmd = cmd
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := waitGreeting(ctx, probeAddr, greeting, p.exited); err != nil {
		p.stop()
		if errors.Is(err, errExited) {
			err = fmt.Errorf("%w (%v)", err, p.err)
		}
		return p, err
	}
	return p, nil
}

// errExited reports that the master exited while a start waited for it.
var errExited = errors.New("dovecot exited during start-up")

// waitGreeting dials addr until it answers with a capability greeting
// ending in greeting.
func waitGreeting(ctx context.Context, addr, greeting string, exited <-chan struct{}) error {
	var lastErr error
	for delay := 2 * time.Millisecond; ; delay = min(delay*2, 50*time.Millisecond) {
		select {
		case <-exited:
			return errExited
		default:
		}
		if lastErr = probe(ctx, addr, greeting); lastErr == nil {
			return nil
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("dovecot not ready at %s after %v: %w", addr, readyTimeout, lastErr)
		case <-time.After(delay):
		}
	}
}

func probe(ctx context.Context, addr, greeting string) error {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("read greeting: %w", err)
		}
		// "* OK Waiting for authentication process to respond.." comes
		// first while auth is starting.
		if strings.HasPrefix(line, "* OK [CAPABILITY ") {
			_, _ = conn.Write([]byte("x LOGOUT\r\n"))
			if !strings.HasSuffix(strings.TrimRight(line, "\r\n"), "] "+greeting) {
				return fmt.Errorf("another server answers at %s: %q", addr, line)
			}
			return nil
		}
		if !strings.HasPrefix(line, "* OK") {
			return fmt.Errorf("unexpected greeting %q", line)
		}
	}
}

// stop sends SIGTERM to the master's whole process group, so every
// process exits at once (imap processes still send "* BYE Server shutting
// down." to their clients), gives the master stopGrace to exit and then
// kills whatever is left of the group. It is idempotent.
//
// The grace is short on purpose: while shutting down, Dovecot 2.3's master
// sleeps whole seconds in a loop before reaping children it signalled
// (measured: 1 s often, 6 s once), and nothing is left for it to do by then.
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
// a moment ago; all are held open together so no two are the same. Another
// process may take a port before Dovecot binds it; callers retry.
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

// isBindError reports whether Dovecot's output says a listener's port was
// taken.
func isBindError(output string) bool {
	return strings.Contains(output, "Address already in use")
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
