package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The mailfathom binary, built once per test binary.
var build struct {
	once sync.Once
	path string
	err  error
}

// binary returns the path of a mailfathom binary built from this module's
// working tree, building it on first use.
//
// It lives in <tmp>/mailfathom-e2e-<uid>/mailfathom-<pid>: pgtest.Main ends
// the test binary with os.Exit, so nothing runs after the tests to remove
// it; instead each build removes the binaries of test processes that no
// longer exist.
func binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() { build.path, build.err = buildBinary() })
	if build.err != nil {
		t.Fatalf("e2e: build mailfathom: %v", build.err)
	}
	return build.path
}

func buildBinary() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is not on PATH: %w", err)
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD names no module: run the tests from inside the module")
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("mailfathom-e2e-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	reapStaleBinaries(dir)
	path := filepath.Join(dir, fmt.Sprintf("mailfathom-%d", os.Getpid()))
	cmd := exec.Command(goBin, "build", "-o", path, "./cmd/mailfathom")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/mailfathom: %w\n%s", err, out)
	}
	return path, nil
}

// reapStaleBinaries removes mailfathom-<pid> files whose process is gone.
func reapStaleBinaries(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "mailfathom-"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// serveProc is one `mailfathom serve` subprocess.
type serveProc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	started time.Time

	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// platformVariables are the variables besides MAILFATHOM_ ones a test may
// pass to a serve process: where the platform's trust store is read from,
// so a test can make a test authority one the platform trusts.
var platformVariables = []string{"SSL_CERT_FILE", "SSL_CERT_DIR"}

// startServe starts `mailfathom serve` with exactly env (MAILFATHOM_
// variables and platformVariables only) plus PATH and HOME, its stdout and
// stderr (the JSON log) in logDir/<name>.log, and waits until it serves.
// The process is killed when t ends if it still runs; when t failed, the
// log's tail is printed.
func startServe(t testing.TB, name, logDir string, env map[string]string) *serveProc {
	t.Helper()
	return startServeWith(t, name, logDir, env, true)
}

func startServeWith(t testing.TB, name, logDir string, env map[string]string, wait bool) *serveProc {
	t.Helper()
	bin := binary(t)
	environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		require.True(t, strings.HasPrefix(k, "MAILFATHOM_") || slices.Contains(platformVariables, k),
			"only MAILFATHOM_ variables and the platform's trust-store locations are passed: %s", k)
		environ = append(environ, k+"="+env[k])
	}
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	defer logFile.Close()

	cmd := exec.Command(bin, "serve")
	cmd.Env = environ
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The service dies with the test binary, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &serveProc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	p.started = time.Now()
	require.NoError(t, cmd.Start())
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if p.running() {
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("log of %s (%s), last lines:\n%s", name, logPath, tailLines(p.rawLog(), 30))
		}
	})
	if wait {
		p.waitLog(t, "serving", 60*time.Second)
	}
	return p
}

func (p *serveProc) pid() int { return p.cmd.Process.Pid }

func (p *serveProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL: no drain, no deferred function, no
// shutdown of its connections beyond what the kernel does.
func (p *serveProc) kill(t testing.TB) {
	t.Helper()
	require.True(t, p.running(), "%s exited on its own before it was killed:\n%s", p.name, tailLines(p.rawLog(), 30))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited
}

// stop ends the process with SIGTERM, the graceful shutdown, and requires a
// clean exit.
func (p *serveProc) stop(t testing.TB) {
	t.Helper()
	require.True(t, p.running(), "%s exited on its own:\n%s", p.name, tailLines(p.rawLog(), 30))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("%s did not stop within 60 s of SIGTERM", p.name)
	}
	require.NoError(t, p.err, "%s exited uncleanly after SIGTERM:\n%s", p.name, tailLines(p.rawLog(), 30))
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
func (p *serveProc) peakRSS() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("unexpected VmHWM line %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
}

func (p *serveProc) rawLog() string {
	data, _ := os.ReadFile(p.logPath)
	return string(data)
}

// logLine is one JSON log record.
type logLine map[string]any

func (l logLine) msg() string { s, _ := l["msg"].(string); return s }

// duration reads a duration attribute, which the log writes as a Go
// duration string, and false when it is missing or malformed.
func (l logLine) duration(key string) (time.Duration, bool) {
	s, ok := l[key].(string)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// logLines parses the JSON records of the log; other lines (the console
// lines serve prints on stdout) are skipped.
func (p *serveProc) logLines() []logLine {
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader([]byte(p.rawLog())))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var l logLine
		if json.Unmarshal(line, &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// count returns how many records have msg and, for every attrs pair, that
// attribute's value printed with %v.
func (p *serveProc) count(msg string, attrs ...string) int {
	n := 0
	for _, l := range p.logLines() {
		if l.msg() != msg {
			continue
		}
		match := true
		for i := 0; i+1 < len(attrs); i += 2 {
			if fmt.Sprint(l[attrs[i]]) != attrs[i+1] {
				match = false
			}
		}
		if match {
			n++
		}
	}
	return n
}

// waitLog waits until the log has a record with msg.
func (p *serveProc) waitLog(t testing.TB, msg string, timeout time.Duration) {
	t.Helper()
	poll.Until(t, timeout, fmt.Sprintf("%s logs %q", p.name, msg), func() (bool, string) {
		if p.count(msg) > 0 {
			return true, ""
		}
		if !p.running() {
			t.Fatalf("%s exited before logging %q (%v):\n%s", p.name, msg, p.err, tailLines(p.rawLog(), 40))
		}
		return false, "\n" + tailLines(p.rawLog(), 40)
	})
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// testBundle is one end-to-end setting: a Dovecot, a database and the
// environment the serve processes get.
type testBundle struct {
	server   *dovecot.Server
	dbURL    string
	pool     *pgxpool.Pool
	env      map[string]string
	dir      string
	caFile   string
	accounts int
}

// setup starts Dovecot with opts and prepares an environment for a serve
// process against the database at dbURL (migrated by serve itself on
// start): no River UI, JSON logs, an ephemeral HTTP port, synchronization
// enabled with a long interval so that only the runs a test causes happen.
func setup(t testing.TB, dbURL string, opts ...dovecot.Option) *testBundle {
	t.Helper()
	s := dovecot.Start(t, opts...)
	dir := t.TempDir()
	files, err := s.CA().WriteFiles(dir)
	require.NoError(t, err)
	pool, err := newPool(dbURL)
	require.NoError(t, err)
	b := &testBundle{
		server: s,
		dbURL:  dbURL,
		pool:   pool,
		dir:    dir,
		caFile: files.CACert,
		env:    serveEnv(dbURL),
	}
	t.Cleanup(func() { b.pool.Close() })
	return b
}

// serveEnv is the environment of a serve process, without accounts,
// against the database at dbURL: no River UI, JSON logs, an ephemeral
// HTTP port, synchronization enabled with a long interval so that only the
// runs a test causes happen.
func serveEnv(dbURL string) map[string]string {
	return map[string]string{
		"MAILFATHOM_DATABASE_URL":                dbURL,
		"MAILFATHOM_HTTP_ADDR":                   "127.0.0.1:0",
		"MAILFATHOM_LOG_FORMAT":                  "json",
		"MAILFATHOM_UI_ENABLED":                  "false",
		"MAILFATHOM_SYNC_ENABLED":                "true",
		"MAILFATHOM_SYNC_INTERVAL":               "1h",
		"MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF":    "1h",
		"MAILFATHOM_SYNC_SHUTDOWN_DRAIN_TIMEOUT": "5s",
	}
}

// folderMapping is one configured folder: an alias on a remote path.
type folderMapping struct{ alias, remotePath string }

// addAccount configures the next account, id, on user u over implicit TLS
// with the harness CA as its trusted authority; without folders it gets the
// default (alias INBOX on the inbox role).
func (b *testBundle) addAccount(t testing.TB, id string, u *dovecot.User, folders ...folderMapping) {
	t.Helper()
	i := b.accounts
	b.accounts++
	pw := filepath.Join(b.dir, fmt.Sprintf("imap-password-%d", i))
	require.NoError(t, os.WriteFile(pw, []byte(u.Password()+"\n"), 0o600))
	p := fmt.Sprintf("MAILFATHOM_ACCOUNTS_%d_", i)
	b.env[p+"ID"] = id
	b.env[p+"HOST"] = b.server.Host()
	b.env[p+"PORT"] = strconv.Itoa(b.server.TLSPort())
	b.env[p+"USERNAME"] = u.Name()
	b.env[p+"PASSWORD"] = "file:" + pw
	b.env[p+"CERTIFICATE_TRUST"] = "AdditionalTrustedAuthority"
	b.env[p+"TRUSTED_CERTIFICATE_AUTHORITY"] = "file:" + b.caFile
	for j, f := range folders {
		b.env[fmt.Sprintf("%sFOLDERS_%d_ALIAS", p, j)] = f.alias
		b.env[fmt.Sprintf("%sFOLDERS_%d_REMOTE_PATH", p, j)] = f.remotePath
	}
}

// start starts a serve process named name with the bundle's environment.
func (b *testBundle) start(t testing.TB, name string) *serveProc {
	t.Helper()
	return startServe(t, name, b.dir, b.env)
}

// storedRow is one stored occurrence with its content's digest.
type storedRow struct {
	uidValidity  int64
	uid          int64
	availability string
	sha          []byte
	length       *int64
}

// stored returns the occurrences of account's alias (every generation),
// in UID order.
func (b *testBundle) stored(t testing.TB, account, alias string) []storedRow {
	t.Helper()
	var out []storedRow
	for _, o := range dbassert.Occurrences(t, b.pool, strings.ToUpper(alias)) {
		if o.Account == strings.ToLower(account) {
			out = append(out, storedRow{uidValidity: int64(o.UIDValidity), uid: int64(o.UID), availability: o.Availability,
				sha: o.ContentSHA256, length: o.ContentLength})
		}
	}
	return out
}

// storedCount counts every stored occurrence in the database.
func (b *testBundle) storedCount(t testing.TB) int {
	t.Helper()
	return dbassert.Counts(t, b.pool).Occurrences
}

// waitStored waits until exactly n messages are stored.
func (b *testBundle) waitStored(t testing.TB, n int, within time.Duration) {
	t.Helper()
	poll.Every(t, 50*time.Millisecond, within, fmt.Sprintf("%d messages stored", n),
		func() bool { return b.storedCount(t) == n },
		func() string { return fmt.Sprintf("%d stored", b.storedCount(t)) })
}

// checkpoint returns the checkpoint of alias (its latest binding).
func (b *testBundle) checkpoint(t testing.TB, alias string) (uidValidity, lastSeen int64) {
	t.Helper()
	cp := dbassert.Checkpoint(t, b.pool, strings.ToUpper(alias))
	return int64(cp.UIDValidity), int64(cp.LastSeenUID)
}

// jobText is every job's arguments, recorded errors and metadata, one
// job after another: what anyone who opens River UI reads of the jobs.
func (b *testBundle) jobText(t testing.TB) string {
	t.Helper()
	var texts []string
	for _, j := range dbassert.Jobs(t, b.pool, "") {
		texts = append(texts, j.Text())
	}
	return strings.Join(texts, " ")
}

func newPool(url string) (*pgxpool.Pool, error) { return pgxpool.New(context.Background(), url) }

// migrate applies the schema and River migrations to the database at url.
func migrate(t testing.TB, url string) {
	t.Helper()
	pool, err := newPool(url)
	require.NoError(t, err)
	defer pool.Close()
	_, err = schema.Migrate(context.Background(), pool, nil)
	require.NoError(t, err)
}
