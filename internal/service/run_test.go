package service_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/service"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/jobs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// traversableTempDir returns a directory the unprivileged postgres user can
// reach, which t.TempDir (mode 0700) is not.
func traversableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mailfathom-service-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

type started struct {
	addr    string
	console *capture.Buffer
	logs    *capture.Buffer
	stop    func() error
}

func start(t *testing.T, opts service.Options) *started {
	t.Helper()
	s := &started{console: &capture.Buffer{}, logs: &capture.Buffer{}}
	opts.Console = s.console
	opts.Logger = slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.HTTPAddr = "127.0.0.1:0"
	listening := make(chan string, 1)
	opts.Listening = func(addr string) { listening <- addr }

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- service.Run(ctx, opts) }()
	select {
	case s.addr = <-listening:
	case err := <-done:
		cancel()
		t.Fatalf("service stopped before serving: %v\nlogs:\n%s", err, s.logs.String())
	case <-time.After(2 * time.Minute):
		cancel()
		t.Fatalf("service did not start; logs:\n%s", s.logs.String())
	}
	var once sync.Once
	var stopErr error
	s.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(time.Minute):
				t.Errorf("service did not stop")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = s.stop() })
	return s
}

func get(t *testing.T, url string, auth ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func queues() map[string]int {
	return map[string]int{jobs.QueueAccounts: 1, jobs.QueueFolders: 1}
}

// TestEmbeddedDefault is the README's run command with nothing configured:
// the embedded cluster starts, migrations apply, River starts, and River UI,
// the probes and metrics are served, River UI only with credentials.
func TestEmbeddedDefault(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(traversableTempDir(t), "postgres")
	opts := service.Options{
		EmbeddedDataDir: dataDir,
		UIEnabled:       true,
		UIUsername:      "admin",
		MigrateOnStart:  true,
		QueueWorkers:    queues(),
		ShutdownDrain:   time.Second,
	}
	s := start(t, opts)
	base := "http://" + s.addr

	code, _ := get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	code, body := get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code, body)
	code, body = get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "go_goroutines")

	code, _ = get(t, base+"/riverui/")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = get(t, base+"/riverui/", "admin", "wrong")
	require.Equal(t, http.StatusUnauthorized, code)

	password := regexp.MustCompile(`River UI password \(generated once, kept in (\S+)\): (\S+)`).FindStringSubmatch(s.console.String())
	require.NotNil(t, password, s.console.String())
	code, body = get(t, base+"/riverui/", "admin", password[2])
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, strings.ToLower(body), "<html")
	// River is started: its queues are registered and visible in River UI.
	poll.Until(t, 10*time.Second, "River UI lists the queues", func() (bool, string) {
		code, body := get(t, base+"/riverui/api/queues", "admin", password[2])
		return code == http.StatusOK && strings.Contains(body, jobs.QueueFolders), fmt.Sprintf("status %d: %s", code, body)
	})

	// The password never reaches the structured log.
	require.NotContains(t, s.logs.String(), password[2])
	require.Contains(t, s.logs.String(), "no mailbox account is configured")

	require.NoError(t, s.stop())
	require.NoFileExists(t, filepath.Join(dataDir, "postmaster.pid"), "the embedded cluster is stopped on exit")

	// A restart reuses the cluster and the password, and prints only where
	// the password is kept.
	s2 := start(t, opts)
	require.NotContains(t, s2.console.String(), password[2])
	require.Contains(t, s2.console.String(), password[1])
	code, _ = get(t, "http://"+s2.addr+"/riverui/", "admin", password[2])
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, s2.stop())
}

// TestConfiguredDatabase serves against a configured database with a UI
// password from a secret file, and a rotated file is honoured at once.
func TestConfiguredDatabase(t *testing.T) {
	t.Parallel()
	pwFile := filepath.Join(t.TempDir(), "ui-password")
	require.NoError(t, os.WriteFile(pwFile, []byte("first\n"), 0o600))
	s := start(t, service.Options{
		DatabaseConnString: pgtest.Database(t),
		UIEnabled:          true,
		UIUsername:         "operator",
		UIPassword: func(context.Context) ([]byte, error) {
			b, err := os.ReadFile(pwFile)
			return bytes.TrimSpace(b), err
		},
		MigrateOnStart: true,
		QueueWorkers:   queues(),
	})
	base := "http://" + s.addr + "/riverui/"
	code, _ := get(t, base, "operator", "first")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, os.WriteFile(pwFile, []byte("second\n"), 0o600))
	code, _ = get(t, base, "operator", "first")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = get(t, base, "operator", "second")
	require.Equal(t, http.StatusOK, code)
}

// TestSchemaNotCurrentWithoutMigrateOnStart refuses to start on a database
// that is behind when told not to migrate.
func TestSchemaNotCurrentWithoutMigrateOnStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := service.Run(ctx, service.Options{
		Logger:             slog.New(slog.DiscardHandler),
		DatabaseConnString: pgtest.Database(t),
		HTTPAddr:           "127.0.0.1:0",
		MigrateOnStart:     false,
		QueueWorkers:       queues(),
	})
	require.ErrorContains(t, err, "run `mailfathom migrate`")
}

// TestTextSearchConfigurationGate refuses to start when the configured text
// search configuration differs from the one the index was built with.
func TestTextSearchConfigurationGate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := dbtest.URL(t)
	cfg, err := config.Load([]string{"MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION=english"})
	require.NoError(t, err)
	err = service.Run(ctx, service.Options{
		Logger:             slog.New(slog.DiscardHandler),
		DatabaseConnString: url,
		HTTPAddr:           "127.0.0.1:0",
		MigrateOnStart:     true,
		QueueWorkers:       queues(),
		Config:             cfg,
	})
	var mismatch *searchindex.ConfigurationMismatchError
	require.ErrorAs(t, err, &mismatch)
	require.Contains(t, err.Error(), `"english"`)
	require.Contains(t, err.Error(), `"simple"`)
	require.Contains(t, err.Error(), "mailfathom reindex-search")
}

// A taken HTTP address fails the start at once, naming the variable,
// before any database is started or migrated and before a UI password is
// generated.
func TestTakenHTTPAddressFailsFirst(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	dir := traversableTempDir(t)
	err = service.Run(context.Background(), service.Options{
		Logger:          slog.New(slog.DiscardHandler),
		HTTPAddr:        taken.Addr().String(),
		UIEnabled:       true,
		EmbeddedDataDir: filepath.Join(dir, "postgres"),
		QueueWorkers:    map[string]int{jobs.QueueAccounts: 1},
	})
	require.ErrorContains(t, err, "MAILFATHOM_HTTP_ADDR ("+taken.Addr().String()+") cannot be listened on")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no cluster was initialised and no password written")
}

// TestDatabaseLateAtStart: a database that refuses connections when serve
// starts (restarting, or started beside it) and answers two seconds later
// is waited for; the start goes on instead of stopping the process.
func TestDatabaseLateAtStart(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.Database(t))
	require.NoError(t, err)
	socket := filepath.Join(u.Query().Get("host"), ".s.PGSQL."+u.Query().Get("port"))

	// A loopback port nothing listens on until the database "comes back":
	// then every connection to it is carried to the cluster's socket.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().(*net.TCPAddr)
	require.NoError(t, ln.Close())
	go func() {
		time.Sleep(2 * time.Second)
		ln, err := net.Listen("tcp", addr.String())
		if err != nil {
			return
		}
		t.Cleanup(func() { _ = ln.Close() })
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				pg, err := net.Dial("unix", socket)
				if err != nil {
					return
				}
				defer pg.Close()
				go func() { _, _ = io.Copy(pg, c) }()
				_, _ = io.Copy(c, pg)
			}()
		}
	}()
	q := u.Query()
	q.Set("host", "127.0.0.1")
	q.Set("port", strconv.Itoa(addr.Port))
	u.RawQuery = q.Encode()

	s := start(t, service.Options{
		DatabaseConnString: u.String(),
		MigrateOnStart:     true,
		QueueWorkers:       queues(),
	})
	require.Contains(t, s.logs.String(), "the database does not answer yet; waiting for it")
	require.Contains(t, s.logs.String(), "the database answers now")
	code, _ := get(t, "http://"+s.addr+"/readyz")
	require.Equal(t, http.StatusOK, code)
}
