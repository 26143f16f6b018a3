package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cluster is a running server started by Start. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg       config
	su        *serverUser
	lock      *dataDirLock
	socketDir string
	tmpSocket bool // socketDir was made under /tmp and Stop removes it
	port      int

	mu      sync.Mutex
	stopped bool
}

// portAttempts bounds how often Start picks another free port after the
// server failed to bind the one it was given.
const portAttempts = 5

// Start starts the cluster in opts.DataDir, creating it with initdb first
// when the directory does not hold one, and returns once the server accepts
// connections. The caller must call Stop; the server is a separate process
// and outlives this one otherwise.
//
// A server still running on the data directory after the process that
// started it died is stopped first and started again with opts. A data
// directory that another live process runs or initialises fails with
// ErrInUse. Start does not rotate or truncate the server log, does not
// create databases or roles (only "postgres" exists in a new cluster), and
// does not upgrade a data directory made by another major version.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := opts.resolve(ctx)
	if err != nil {
		return nil, err
	}
	su, err := lookupServerUser()
	if err != nil {
		return nil, err
	}
	if err := prepareParent(c, su); err != nil {
		return nil, err
	}
	lock, err := lockDataDir(c.lockPath())
	if err != nil {
		return nil, err
	}
	cl := &Cluster{cfg: c, su: su, lock: lock}
	started := false
	defer func() {
		if !started {
			cl.release()
		}
	}()

	if err := stopOrphan(ctx, c, su); err != nil {
		return nil, err
	}
	if err := initialize(ctx, c, su); err != nil {
		return nil, err
	}
	if err := cl.prepareSocketDir(); err != nil {
		return nil, err
	}
	if err := cl.prepareLog(); err != nil {
		return nil, err
	}
	if err := cl.start(ctx); err != nil {
		return nil, err
	}
	started = true
	return cl, nil
}

func (cl *Cluster) prepareSocketDir() error {
	c := cl.cfg
	dir := c.SocketDir
	if c.socketDirDefaulted && len(dir)+socketFileLen > unixPathMax {
		tmp, err := os.MkdirTemp("/tmp", "mailfathom-pg-")
		if err != nil {
			return fmt.Errorf("pgcluster: socket directory: %w", err)
		}
		c.Logf("socket directory %s is too long for a unix socket; using %s", dir, tmp)
		cl.socketDir, cl.tmpSocket = tmp, true
		return cl.su.chown(tmp)
	}
	if _, err := cl.su.mkdir(dir); err != nil {
		return err
	}
	cl.socketDir = dir
	return cl.su.checkTraversable(dir)
}

// prepareLog creates the server log beside the data directory, owned by the
// server user, who may not be able to create files in that directory.
func (cl *Cluster) prepareLog() error {
	f, err := os.OpenFile(cl.cfg.logPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("pgcluster: server log: %w", err)
	}
	f.Close()
	return cl.su.chown(cl.cfg.logPath())
}

// start runs pg_ctl start, retrying with another port when the port was
// picked here and the server could not bind it.
func (cl *Cluster) start(ctx context.Context) error {
	c := cl.cfg
	timeout := strconv.Itoa(int((c.StartTimeout + time.Second - 1) / time.Second))
	for attempt := 1; ; attempt++ {
		port := c.Port
		if port == 0 {
			var err error
			if port, err = pickPort(); err != nil {
				return err
			}
		}
		var offset int64
		if fi, err := os.Stat(c.logPath()); err == nil {
			offset = fi.Size()
		}
		begin := time.Now()
		out, err := pgCtl(ctx, c, cl.su, "start", "-D", c.DataDir, "-l", c.logPath(),
			"-w", "-t", timeout, "-o", serverOptions(cl.settings(port)))
		if err == nil {
			c.Logf("server on %s started in %v (socket %s, port %d)", c.DataDir, time.Since(begin).Round(time.Millisecond), cl.socketDir, port)
			cl.port = port
			return nil
		}
		serverLog := logSince(c.logPath(), offset, logTailBytes)
		// pg_ctl gives up after its timeout while the server may still
		// come up; leave nothing running behind an error.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if pid, _ := livePostmaster(c.DataDir, c.Logf); pid != 0 {
			_ = stopServer(stopCtx, c, cl.su)
		}
		cancel()
		if c.Port == 0 && attempt < portAttempts && ctx.Err() == nil && portTaken(serverLog) {
			c.Logf("port %d is taken; trying another", port)
			continue
		}
		return fmt.Errorf("pgcluster: start server on %s: %w: %s\nlast lines of the server log %s:\n%s",
			c.DataDir, err, out, c.logPath(), serverLog)
	}
}

// settings returns the server settings for one start: the non-durable
// defaults, the caller's overrides, and the ones derived from Options.
func (cl *Cluster) settings(port int) map[string]string {
	c := cl.cfg
	s := map[string]string{}
	if !c.Durable {
		s["fsync"] = "off"
		s["synchronous_commit"] = "off"
		s["full_page_writes"] = "off"
	}
	maps.Copy(s, c.Settings)
	s["port"] = strconv.Itoa(port)
	s["unix_socket_directories"] = `"` + cl.socketDir + `"`
	s["listen_addresses"] = ""
	if c.ListenTCP {
		s["listen_addresses"] = "127.0.0.1"
	}
	return s
}

// serverOptions renders settings for pg_ctl -o, which hands them to a shell.
func serverOptions(settings map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		fmt.Fprintf(&b, "-c %s ", shellQuote(k+"="+settings[k]))
	}
	return strings.TrimSpace(b.String())
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// portTaken reports whether a server log says the port was in use: the TCP
// port, or the socket file's name in a shared socket directory.
func portTaken(serverLog string) bool {
	return strings.Contains(serverLog, "Address already in use") ||
		strings.Contains(serverLog, ".s.PGSQL.") && strings.Contains(serverLog, "already exists")
}

// pickPort picks the port for a start when Options.Port is 0; tests replace
// it.
var pickPort = freePort

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop shuts the server down (a fast shutdown: open sessions are ended) and
// waits until it has exited. Calling it again after it succeeded does
// nothing; after an error it tries again. It does not remove the data
// directory.
func (cl *Cluster) Stop(ctx context.Context) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.stopped {
		return nil
	}
	if err := stopServer(ctx, cl.cfg, cl.su); err != nil {
		return err
	}
	cl.cfg.Logf("server on %s stopped", cl.cfg.DataDir)
	cl.stopped = true
	cl.release()
	return nil
}

// release drops the data directory's lock and the /tmp socket directory.
func (cl *Cluster) release() {
	cl.lock.unlock()
	if cl.tmpSocket {
		_ = os.RemoveAll(cl.socketDir)
	}
}

// ConnString returns a postgres:// URL that connects to database over the
// unix socket as the superuser "postgres", for example
// "postgres://postgres@/app?host=%2Fsrv%2Fpg-socket&port=41234&sslmode=disable".
// pgx and libpq accept it; golang-migrate's pgx driver accepts it with the
// scheme changed to "pgx5".
func (cl *Cluster) ConnString(database string) string {
	q := url.Values{
		"host":    {cl.socketDir},
		"port":    {strconv.Itoa(cl.port)},
		"sslmode": {"disable"},
	}
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + database, RawQuery: q.Encode()}
	return u.String()
}

// TCPConnString is like ConnString but connects over 127.0.0.1. It fails
// when the cluster was started without Options.ListenTCP.
func (cl *Cluster) TCPConnString(database string) (string, error) {
	if !cl.cfg.ListenTCP {
		return "", errors.New("pgcluster: the cluster does not listen on TCP (Options.ListenTCP is false)")
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(cl.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String(), nil
}

// DataDir returns the absolute data directory.
func (cl *Cluster) DataDir() string { return cl.cfg.DataDir }

// SocketDir returns the directory holding the server's unix socket.
func (cl *Cluster) SocketDir() string { return cl.socketDir }

// Port returns the server's port, which names the socket file and, with
// Options.ListenTCP, is its TCP port on 127.0.0.1.
func (cl *Cluster) Port() int { return cl.port }

// LogPath returns the server log, which every start appends to.
func (cl *Cluster) LogPath() string { return cl.cfg.logPath() }

// StopOrphan stops a server left running on opts.DataDir by a process that
// died without calling Stop, and reports ErrInUse when a live process holds
// the data directory. A data directory with no running server is not an
// error. It is meant for reaping clusters of killed test binaries; Start
// does the same on its own data directory. Of the options it uses DataDir,
// BinDir and Logf.
func StopOrphan(ctx context.Context, opts Options) error {
	c, err := opts.resolve(ctx)
	if err != nil {
		return err
	}
	su, err := lookupServerUser()
	if err != nil {
		return err
	}
	lock, err := lockDataDir(c.lockPath())
	if err != nil {
		return err
	}
	defer lock.unlock()
	return stopOrphan(ctx, c, su)
}
