package cyrus

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mailfathom/mailfathom/internal/testharness/serverproc"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

// Host is the loopback address both listeners bind.
const Host = "127.0.0.1"

// mailUserName is the account Cyrus's processes run as when the test runs
// as root.
const mailUserName = "nobody"

// Server is a running Cyrus IMAP bound to one test. Its methods report
// failures to that test with t.Fatal, so they must be called from the
// test's goroutine, like t.FailNow.
type Server struct {
	t  testing.TB
	in *instance
}

// instance is one Cyrus configuration and data directory, possibly shared
// by several Server values.
type instance struct {
	// Instance runs master; its runs tell helper sessions of an earlier
	// run, which are stale.
	serverproc.Instance
	params configParams
	ca     *testca.Bundle
	// pickAddrs picks the listeners' addresses of a first start:
	// serverproc.FreeAddrs, or a test's stand-in playing another process
	// that takes a port first.
	pickAddrs func(hosts ...string) ([]string, error)

	mu    sync.Mutex // guards params, which a start writes, and users
	users map[string]bool
}

// Start starts a Cyrus IMAP configured by opts for t and stops it,
// removing its directory, in t.Cleanup. If the test failed, the cleanup
// first logs the tail of master's output. Start installs what Cyrus needs
// and unpacks it on the process's first start (see the package
// documentation) and fails the test, never skips it, when that fails.
//
// The server has no users until AddUser or NewUser.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	in, err := newInstance(t.Logf, o)
	if err != nil {
		t.Fatalf("cyrus: %v", err)
	}
	in.CloseAfter(t)
	return &Server{t: t, in: in}
}

func newInstance(logf func(string, ...any), o options) (*instance, error) {
	inst, err := install(logf)
	if err != nil {
		return nil, err
	}
	id, err := currentIdentity()
	if err != nil {
		return nil, err
	}
	dir, err := makeDir()
	if err != nil {
		return nil, err
	}
	ca := o.ca
	if ca == nil {
		ca = testca.New()
	}
	p := configParams{dir: dir, id: id, inst: inst, opts: o}
	in := &instance{
		Instance:  serverproc.Instance{Name: "cyrus", Dir: dir, LogFile: p.logFile(), LogName: "master output"},
		ca:        ca,
		users:     map[string]bool{},
		params:    p,
		pickAddrs: serverproc.FreeAddrs,
	}
	if err := in.prepare(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := in.start(true); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return in, nil
}

// currentIdentity decides who Cyrus's processes run as: nobody when the
// test runs as root (master drops to it), otherwise the current user.
func currentIdentity() (identity, error) {
	name := mailUserName
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return identity{}, fmt.Errorf("look up current user: %w", err)
		}
		name = u.Username
	}
	u, err := user.Lookup(name)
	if err != nil {
		return identity{}, fmt.Errorf("look up user %q: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return identity{user: name, uid: uid, gid: gid, root: os.Geteuid() == 0}, nil
}

// ownerFile names, in an instance directory, the process that made it.
const ownerFile = "owner"

// makeDir creates the instance directory (serverproc.MakeDir) after
// removing the directories of test processes that have ended: a shared
// server's directory outlives a test binary whose TestMain does not call
// StopShared.
func makeDir() (string, error) {
	sweepAbandoned(serverproc.DirParent())
	dir, err := serverproc.MakeDir("mfcyrus-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// sweepAbandoned removes the instance directories under parent whose
// owning process no longer runs. A directory without an owner file, being
// made at this moment, is left alone; so is one whose owner this process
// may not signal.
func sweepAbandoned(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, "mfcyrus-*"))
	for _, dir := range dirs {
		text, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(text))
		if err != nil || pid <= 0 {
			continue
		}
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			stopAbandoned(dir)
			os.RemoveAll(dir)
		}
	}
}

// stopAbandoned kills the process group of the master that serves dir, if
// one still runs: a master its test binary did not take down with it.
// The pid file's process must name dir on its command line, so that a
// reused process id harms nothing.
func stopAbandoned(dir string) {
	text, err := os.ReadFile(filepath.Join(dir, "conf", "master.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil || pid <= 0 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), dir+"/") {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// prepare writes the TLS files and the directories Cyrus writes in, owned
// by its user.
func (in *instance) prepare() error {
	p := &in.params
	tlsDir := filepath.Join(p.dir, "tls")
	if err := os.Mkdir(tlsDir, 0o755); err != nil {
		return err
	}
	files, err := in.ca.WriteFiles(tlsDir)
	if err != nil {
		return err
	}
	p.certFile, p.keyFile = files.ServerCert, files.ServerKey
	for _, d := range []string{p.configDir(), p.socketDir(), p.telemetryDir(), p.spoolDir(), p.tempDir()} {
		if err := os.Mkdir(d, 0o750); err != nil {
			return err
		}
		if err := in.chown(d); err != nil {
			return err
		}
	}
	// Cyrus's user reads the key and writes master's output.
	if err := os.WriteFile(p.logFile(), nil, 0o644); err != nil {
		return err
	}
	for _, f := range []string{p.keyFile, p.logFile()} {
		if err := in.chown(f); err != nil {
			return err
		}
	}
	return nil
}

// chown gives path to Cyrus's user when running as root.
func (in *instance) chown(path string) error {
	if !in.params.id.root {
		return nil
	}
	return os.Lchown(path, in.params.id.uid, in.params.id.gid)
}

// start starts master. With newPorts it picks free ports first and retries
// with others when master could not bind them; without, it reuses the
// configured ones (a restart).
func (in *instance) start(newPorts bool) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.Supervisor.Start(newPorts, func() (*serverproc.Process, error) {
		if newPorts {
			addrs, err := in.pickAddrs(Host, Host)
			if err != nil {
				return nil, fmt.Errorf("pick free ports: %w", err)
			}
			in.params.plainAddr, in.params.tlsAddr = addrs[0], addrs[1]
		}
		if err := os.WriteFile(in.params.confFile(), []byte(in.params.render()), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(in.params.masterFile(), []byte(in.params.renderMaster()), 0o644); err != nil {
			return nil, err
		}
		// A restart appends to the same log; remember where this run starts.
		logStart := len(serverproc.ReadLog(in.params.logFile()))
		proc, err := startProcess(in.params)
		if err == nil {
			return proc, nil
		}
		if bindFailed(proc, err) {
			return nil, serverproc.PortTaken(err)
		}
		output := serverproc.ReadLog(in.params.logFile())
		if logStart <= len(output) {
			output = output[logStart:]
		}
		return nil, fmt.Errorf("%w\nconfiguration: %s\noutput:\n%s", err, in.params.confFile(), serverproc.Tail(output, 30))
	})
}

// For returns a view of s bound to t, typically a subtest of the test that
// started s: failures of its methods and of the users it adds go to t, and
// those users' cleanups run when t ends. The server itself still stops with
// the test that started it.
func (s *Server) For(t testing.TB) *Server {
	return &Server{t: t, in: s.in}
}

// Addr returns the plain listener's host:port, which offers STARTTLS and,
// as Cyrus is configured here (allowplaintext), plaintext logins.
func (s *Server) Addr() string { return s.in.params.plainAddr }

// TLSAddr returns the implicit-TLS listener's host:port.
func (s *Server) TLSAddr() string { return s.in.params.tlsAddr }

// Host returns Host, "127.0.0.1", the address of both listeners. The
// server certificate is valid for it.
func (s *Server) Host() string { return Host }

// Port returns the plain listener's port.
func (s *Server) Port() int { return serverproc.Port(s.Addr()) }

// TLSPort returns the implicit-TLS listener's port.
func (s *Server) TLSPort() int { return serverproc.Port(s.TLSAddr()) }

// CA returns the server's certificate bundle: CertPool() trusts the root
// that signed the certificate the server presents.
func (s *Server) CA() *testca.Bundle { return s.in.ca }

// TLSConfig returns a new client TLS configuration that trusts the server's
// CA. ServerName is empty, so the dialed host is verified.
func (s *Server) TLSConfig() *tls.Config { return s.in.ca.ClientTLSConfig() }

// Dir returns the server's directory (configuration, TLS files, sasldb,
// Cyrus's databases and spool, master's output). Tests must not rely on
// its layout beyond what this package documents.
func (s *Server) Dir() string { return s.in.params.dir }

// ConfigPath returns the path of the generated imapd.conf.
func (s *Server) ConfigPath() string { return s.in.params.confFile() }

// Packages returns the names of the unpacked Debian package files, which
// carry Cyrus's version, for example
// "cyrus-imapd_3.6.1-4+deb12u4_amd64.deb cyrus-common_3.6.1-4+deb12u4_amd64.deb".
func (s *Server) Packages() string { return s.in.params.inst.debs }

// LogPath returns the path of the file holding master's standard output
// and error, which its children inherit.
func (s *Server) LogPath() string { return s.in.params.logFile() }

// Log returns what Cyrus's processes wrote to their standard output and
// error so far: fatal errors, such as a configuration it cannot read.
// Cyrus logs everything else through syslog(3), which the harness does not
// capture; what a client sent is in User.Sessions instead.
func (s *Server) Log() string { return serverproc.ReadLog(s.LogPath()) }

// StartupTime returns how long the last start took, from exec to the first
// greeting with idled ready.
func (s *Server) StartupTime() time.Duration { return s.in.StartupTime() }

// Stop stops Cyrus: master ends every process, so clients see their
// connections close, and new connections are refused until Restart. Users
// and mail are kept; User helpers fail while the server is stopped. It
// fails the test for a shared server.
func (s *Server) Stop() {
	s.t.Helper()
	s.in.MustOwn(s.t, "Stop")
	s.in.Stop()
}

// Restart stops Cyrus if it runs and starts it again on the same ports with
// the same users and mail, waiting until it accepts connections. Open
// connections are closed by the stop; the users' helper sessions are
// replaced on next use. It fails the test for a shared server.
func (s *Server) Restart() {
	s.t.Helper()
	s.in.MustOwn(s.t, "Restart")
	s.in.Stop()
	if err := s.in.start(false); err != nil {
		s.t.Fatalf("cyrus: restart: %v", err)
	}
}

// errStopped is returned by helper connections while the server is stopped.
var errStopped = errors.New("cyrus is stopped")
