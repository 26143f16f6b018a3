package pgcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/mailfathom/mailfathom/internal/sysdeps"
)

// Options configures Start. Every field but DataDir has a usable zero value.
type Options struct {
	// DataDir is the cluster's data directory. Required. A relative path is
	// made absolute against the working directory. When it does not hold a
	// cluster yet (no PG_VERSION file), Start creates one with initdb; the
	// directory must then be absent or empty. Its parent is created when
	// missing and also holds the server log (DataDir + ".log") and the lock
	// file that keeps two processes from running the same cluster
	// (DataDir + ".lock").
	DataDir string

	// SocketDir is the directory that holds the server's unix socket.
	// Default: DataDir + "-socket", created with mode 0700. When that path
	// is too long for a unix socket (the kernel allows about 107 bytes for
	// the socket file's whole path), Start uses a fresh directory under
	// /tmp instead and Stop removes it. An explicit SocketDir that is too
	// long is an error. It must not contain a comma.
	SocketDir string

	// Port is the server's port. It names the socket file
	// (SocketDir/.s.PGSQL.<Port>) and, with ListenTCP, is the TCP port on
	// 127.0.0.1. Default 0: Start picks a free loopback port, each time it
	// runs, and tries another one if the server cannot bind it.
	Port int

	// ListenTCP makes the server listen on 127.0.0.1:Port as well as on the
	// unix socket. Default false: socket only.
	ListenTCP bool

	// Durable keeps PostgreSQL's crash safety. Default false, meant for
	// tests: fsync, synchronous_commit and full_page_writes are off and
	// initdb does not sync, so a machine crash can corrupt the cluster. A
	// persistent database must set it.
	Durable bool

	// Settings are extra server settings (postgresql.conf parameters, e.g.
	// "max_connections": "200"). They are passed on the server's command
	// line at each Start, so they override postgresql.conf and ALTER SYSTEM,
	// and override the non-durable defaults above. Default: none. The
	// settings Start manages itself (port, listen_addresses,
	// unix_socket_directories) are rejected; use the fields above.
	Settings map[string]string

	// BinDir is the directory holding initdb, pg_ctl and postgres.
	// Default: found by sysdeps.Ensure(ctx, Logf, sysdeps.PostgreSQL), which
	// installs the postgresql package first when it is missing and the
	// process may install it.
	BinDir string

	// StartTimeout bounds how long Start waits for the server to accept
	// connections (this includes crash recovery after an unclean stop).
	// Default 2 minutes. Running initdb is not included.
	StartTimeout time.Duration

	// Logf receives progress messages. Default: discarded.
	Logf func(format string, args ...any)
}

// unixPathMax is the longest unix socket path Linux accepts: sun_path holds
// 108 bytes including the terminating NUL.
const unixPathMax = 107

// socketFileLen is the length of the longest socket file name under
// SocketDir, with its separator.
var socketFileLen = len("/.s.PGSQL.65535")

// managedSettings are the server settings Start derives from Options.
var managedSettings = []string{"port", "listen_addresses", "unix_socket_directories"}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// config is Options with defaults filled in and validated.
type config struct {
	Options
	// socketDirDefaulted says SocketDir was not given, so a path too long
	// for a socket falls back to /tmp instead of failing.
	socketDirDefaulted bool
}

// resolve fills in the defaults of o and validates it. It is the one place
// that knows the defaults documented on Options.
func (o Options) resolve(ctx context.Context) (config, error) {
	if o.DataDir == "" {
		return config{}, errors.New("pgcluster: Options.DataDir is required")
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return config{}, fmt.Errorf("pgcluster: data directory %q: %w", o.DataDir, err)
	}
	c := config{socketDirDefaulted: o.SocketDir == ""}
	o.DataDir = dataDir
	o.SocketDir = cmp.Or(o.SocketDir, dataDir+"-socket")
	o.StartTimeout = cmp.Or(o.StartTimeout, 2*time.Minute)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.SocketDir, err = filepath.Abs(o.SocketDir); err != nil {
		return config{}, fmt.Errorf("pgcluster: socket directory: %w", err)
	}

	if o.Port < 0 || o.Port > 65535 {
		return config{}, fmt.Errorf("pgcluster: port %d out of range", o.Port)
	}
	if o.StartTimeout < 0 {
		return config{}, fmt.Errorf("pgcluster: negative start timeout %v", o.StartTimeout)
	}
	if strings.ContainsAny(o.SocketDir, ",\x00") {
		return config{}, fmt.Errorf("pgcluster: socket directory %q must not contain a comma", o.SocketDir)
	}
	if !c.socketDirDefaulted && len(o.SocketDir)+socketFileLen > unixPathMax {
		return config{}, fmt.Errorf("pgcluster: socket directory %q is too long: a unix socket path is limited to %d bytes", o.SocketDir, unixPathMax)
	}
	for name, value := range o.Settings {
		if !settingName.MatchString(name) {
			return config{}, fmt.Errorf("pgcluster: invalid setting name %q", name)
		}
		for _, m := range managedSettings {
			if strings.EqualFold(name, m) {
				return config{}, fmt.Errorf("pgcluster: setting %q is managed by pgcluster; use the Options fields", name)
			}
		}
		if strings.ContainsRune(value, 0) {
			return config{}, fmt.Errorf("pgcluster: setting %q contains a NUL byte", name)
		}
	}

	if o.BinDir == "" {
		paths, err := sysdeps.Ensure(ctx, o.Logf, sysdeps.PostgreSQL)
		if err != nil {
			return config{}, fmt.Errorf("pgcluster: %w", err)
		}
		o.BinDir = filepath.Dir(paths[0])
	}
	c.Options = o
	return c, nil
}

func (c config) logPath() string  { return c.DataDir + ".log" }
func (c config) lockPath() string { return c.DataDir + ".lock" }
func (c config) bin(name string) string {
	return filepath.Join(c.BinDir, name)
}
