package dovecot

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailfathom/mailfathom/internal/sysdeps"
	"github.com/mailfathom/mailfathom/internal/testharness/serverproc"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

// Host is the loopback address the implicit-TLS listener, and by default
// the plain listener, bind.
const Host = "127.0.0.1"

// noSTARTTLSHost is the address the plain listener binds with
// WithoutSTARTTLS; see there.
const noSTARTTLSHost = "127.0.0.3"

// maxUserIPConnections is Dovecot's mail_max_userip_connections here,
// raised from Dovecot's default of 10 because a sync engine with a
// connection per folder plus the harness's own connection reaches 10 fast.
const maxUserIPConnections = 100

// Server is a running Dovecot bound to one test. Its methods report
// failures to that test with t.Fatal, so they must be called from the test's
// goroutine, like t.FailNow.
type Server struct {
	t  testing.TB
	in *instance
}

// instance is one Dovecot configuration and data directory, possibly shared
// by several Server values.
type instance struct {
	// Instance runs the master; its runs tell helper connections of an
	// earlier run, which are stale.
	serverproc.Instance
	binary string
	params configParams
	conf   string
	ca     *testca.Bundle

	mu    sync.Mutex // guards params, which a start writes, and users
	users map[string]bool

	seedBase time.Time
	seedSeq  atomic.Uint64
}

// Start starts a Dovecot configured by opts for t and stops it, removing
// its directory, in t.Cleanup. If the test failed, the cleanup first logs
// the tail of Dovecot's log. Start installs Dovecot through sysdeps.Ensure
// when it is missing and fails the test, never skips it, when that fails.
//
// A start takes 33–60 ms (see StartupTime and the package documentation);
// the server has no users until AddUser or NewUser.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	in, err := newInstance(t.Logf, o)
	if err != nil {
		t.Fatalf("dovecot: %v", err)
	}
	in.CloseAfter(t)
	return &Server{t: t, in: in}
}

func newInstance(logf func(string, ...any), o options) (*instance, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	paths, err := sysdeps.Ensure(ctx, logf, sysdeps.Dovecot)
	if err != nil {
		return nil, err
	}
	id, err := currentIdentity()
	if err != nil {
		return nil, err
	}
	dir, err := serverproc.MakeDir("mfdovecot-")
	if err != nil {
		return nil, err
	}
	ca := o.ca
	if ca == nil {
		ca = testca.New()
	}
	p := configParams{dir: dir, id: id, opts: o, maxUserIPs: maxUserIPConnections}
	in := &instance{
		Instance: serverproc.Instance{Name: "dovecot", Dir: dir, LogFile: p.logFile(), LogName: "log tail"},
		binary:   paths[0],
		ca:       ca,
		users:    map[string]bool{},
		seedBase: time.Now(),
		params:   p,
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

// prepare writes the TLS files and creates the users and home directories.
func (in *instance) prepare() error {
	p := &in.params
	tlsDir := filepath.Join(p.dir, "tls")
	for _, d := range []string{tlsDir, p.usersDir(), p.homeDir()} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	files, err := in.ca.WriteFiles(tlsDir)
	if err != nil {
		return err
	}
	p.certFile, p.keyFile = files.ServerCert, files.ServerKey
	if leaf := p.opts.cert; leaf != nil {
		if p.certFile, p.keyFile, err = leaf.WriteFiles(tlsDir, "presented"); err != nil {
			return err
		}
	}
	if p.opts.oauth2URL != "" {
		if err := os.WriteFile(p.oauth2File(), []byte(p.renderOAuth2()), 0o644); err != nil {
			return err
		}
	}
	in.conf = filepath.Join(p.dir, "dovecot.conf")
	return nil
}

// start starts the master. With newPorts it picks free ports first and
// retries with others when Dovecot could not bind them; without, it reuses
// the configured ones (a restart).
func (in *instance) start(newPorts bool) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	plainHost := Host
	if in.params.opts.noSTARTTLS {
		plainHost = noSTARTTLSHost
	}
	return in.Supervisor.Start(newPorts, func() (*serverproc.Process, error) {
		if newPorts {
			addrs, err := serverproc.FreeAddrs(plainHost, Host)
			if err != nil {
				return nil, fmt.Errorf("pick free ports: %w", err)
			}
			in.params.plainAddr, in.params.tlsAddr = addrs[0], addrs[1]
		}
		if err := os.WriteFile(in.conf, []byte(in.params.render()), 0o644); err != nil {
			return nil, err
		}
		// A restart appends to the same log; remember where this run starts.
		logStart := len(serverproc.ReadLog(in.params.logFile()))
		proc, err := startProcess(in.binary, in.conf, in.params.dir, in.params.outputFile(), in.params.plainAddr, in.params.greeting())
		if err == nil {
			return proc, nil
		}
		output := ""
		if proc != nil {
			output = serverproc.ReadLog(in.params.outputFile())
		}
		logText := serverproc.ReadLog(in.params.logFile())
		if logStart <= len(logText) {
			logText = logText[logStart:]
		}
		if isBindError(output + logText) {
			return nil, serverproc.PortTaken(err)
		}
		return nil, fmt.Errorf("%w\nconfiguration: %s\noutput:\n%s\nlog:\n%s", err, in.conf, serverproc.Tail(output, 30), serverproc.Tail(logText, 30))
	})
}

// For returns a view of s bound to t, typically a subtest of the test that
// started s: failures of its methods and of the users it adds go to t, and
// those users' cleanups run when t ends. The server itself still stops with
// the test that started it.
func (s *Server) For(t testing.TB) *Server {
	return &Server{t: t, in: s.in}
}

// Addr returns the plain listener's host:port, which offers STARTTLS
// unless WithoutSTARTTLS was given.
func (s *Server) Addr() string { return s.in.params.plainAddr }

// TLSAddr returns the implicit-TLS listener's host:port.
func (s *Server) TLSAddr() string { return s.in.params.tlsAddr }

// Host returns Host, "127.0.0.1": the address of TLSAddr and, unless
// WithoutSTARTTLS was given, of Addr. The server certificate is valid for
// it.
func (s *Server) Host() string { return Host }

// Port returns the plain listener's port.
func (s *Server) Port() int { return serverproc.Port(s.Addr()) }

// TLSPort returns the implicit-TLS listener's port.
func (s *Server) TLSPort() int { return serverproc.Port(s.TLSAddr()) }

// CA returns the server's certificate bundle: CertPool() trusts the root
// that signed Server, the certificate the server presents unless
// WithCertificate chose another.
func (s *Server) CA() *testca.Bundle { return s.in.ca }

// TLSConfig returns a new client TLS configuration that trusts the server's
// CA. ServerName is empty, so the dialed host is verified.
func (s *Server) TLSConfig() *tls.Config { return s.in.ca.ClientTLSConfig() }

// Dir returns the server's directory (configuration, TLS files, users,
// homes, log). Tests must not rely on its layout beyond what this package
// documents.
func (s *Server) Dir() string { return s.in.params.dir }

// ConfigPath returns the path of the generated dovecot.conf.
func (s *Server) ConfigPath() string { return s.in.conf }

// LogPath returns the path of Dovecot's log file, shared by all log levels.
func (s *Server) LogPath() string { return s.in.params.logFile() }

// Log returns Dovecot's log so far. Dovecot writes it asynchronously
// through its log process, so a line about an event that just happened may
// not be there yet: use WaitLog for that.
func (s *Server) Log() string { return serverproc.ReadLog(s.LogPath()) }

// LogWait is how long a test should let WaitLog wait for the line of an
// event that has already happened. Dovecot's processes log through its log
// process, which a machine busy with the whole suite may hold back for
// seconds; WaitLog returns as soon as the line is there, so the bound only
// decides how long a missing line takes to fail.
const LogWait = 30 * time.Second

// WaitLog waits up to timeout for a log line containing substr and returns
// the first such line, failing the test if none appears.
func (s *Server) WaitLog(substr string, timeout time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, line := range strings.Split(s.Log(), "\n") {
			if strings.Contains(line, substr) {
				return line
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("dovecot: no log line containing %q after %v; log tail:\n%s", substr, timeout, serverproc.Tail(s.Log(), 20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StartupTime returns how long the last start took, from exec to the first
// capability greeting.
func (s *Server) StartupTime() time.Duration { return s.in.StartupTime() }

// Stop stops Dovecot: every process gets SIGTERM, so clients see
// "* BYE Server shutting down." and the connection close, and new
// connections are refused until Restart. Users and mail are kept; User
// helpers fail while the server is stopped. It fails the test for a shared
// server.
func (s *Server) Stop() {
	s.t.Helper()
	s.in.MustOwn(s.t, "Stop")
	s.in.Stop()
}

// Restart stops Dovecot if it runs and starts it again on the same ports
// with the same users and mail, waiting until it accepts connections.
// Open connections are closed by the stop; the users' helper sessions are
// replaced on next use. It fails the test for a shared server.
func (s *Server) Restart() {
	s.t.Helper()
	s.in.MustOwn(s.t, "Restart")
	s.in.Stop()
	if err := s.in.start(false); err != nil {
		s.t.Fatalf("dovecot: restart: %v", err)
	}
}

// RestartWith applies opts to the server's configuration and restarts it
// as Restart does, on the same ports with the same users and mail: a
// server whose advertised capabilities change between two sessions, as
// after an upgrade or a downgrade. Options that write files at start
// (WithCA, WithCertificate, WithOAuth2) keep what Start wrote. It fails
// the test for a shared server.
func (s *Server) RestartWith(opts ...Option) {
	s.t.Helper()
	s.in.MustOwn(s.t, "RestartWith")
	s.in.Stop()
	s.in.mu.Lock()
	for _, opt := range opts {
		opt(&s.in.params.opts)
	}
	s.in.mu.Unlock()
	if err := s.in.start(false); err != nil {
		s.t.Fatalf("dovecot: restart: %v", err)
	}
}

// errStopped is returned by helper connections while the server is stopped.
var errStopped = errors.New("dovecot is stopped")
