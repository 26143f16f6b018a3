// Package sysdeps makes sure the system programs MailFathom's embedded
// default and test harness start (PostgreSQL, Dovecot, and the libraries
// of the Cyrus IMAP server the harness unpacks) are installed, and
// downloads the packages a harness unpacks itself (Download).
//
// It installs a missing Debian package with apt-get when the process runs as
// root on a machine that has apt-get, and otherwise fails with an error that
// names the missing program and the package that provides it. It never
// reports success for a program it could not find: a caller that needs a
// server either gets one or a reason.
package sysdeps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Requirement is one program a caller needs and the package that provides it.
type Requirement struct {
	// Program is the executable's name, used in messages and, when Find is
	// nil, looked up on PATH.
	Program string
	// Package is the Debian package that installs Program.
	Package string
	// Find locates the program and returns its path. Nil means a PATH
	// lookup of Program.
	Find func() (string, error)
}

func (r Requirement) find() (string, error) {
	if r.Find != nil {
		return r.Find()
	}
	return exec.LookPath(r.Program)
}

// MissingError reports programs that are not installed and could not be
// installed here.
type MissingError struct {
	Missing []Requirement
	// Reason says why they were not installed.
	Reason string
}

func (e *MissingError) Error() string {
	var names, pkgs []string
	for _, r := range e.Missing {
		names = append(names, r.Program)
		pkgs = append(pkgs, r.Package)
	}
	return fmt.Sprintf("required programs not installed: %s (%s); install them with: apt-get install -y %s",
		strings.Join(names, ", "), e.Reason, strings.Join(pkgs, " "))
}

// lockPath serializes apt-get between processes that start at the same
// moment, such as the test binaries of one `go test ./...`.
const lockPath = "/tmp/mailfathom-sysdeps.lock"

// Ensure returns the path of every requirement, in order, installing the
// packages of the missing ones first when it can. Output of apt-get goes to
// log, which may be nil.
func Ensure(ctx context.Context, log func(format string, args ...any), reqs ...Requirement) ([]string, error) {
	if log == nil {
		log = func(string, ...any) {}
	}
	paths, missing := locate(reqs)
	if len(missing) == 0 {
		// A program is on disk as soon as dpkg unpacks it, before its
		// package's configuration has run (Dovecot's users are created
		// then): wait for an install another process is making.
		if err := waitForInstall(); err != nil {
			return nil, fmt.Errorf("sysdeps: lock %s: %w", lockPath, err)
		}
		return paths, nil
	}
	if os.Geteuid() != 0 {
		return nil, &MissingError{Missing: missing, Reason: "not running as root, so they cannot be installed automatically"}
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return nil, &MissingError{Missing: missing, Reason: "apt-get is not available"}
	}

	unlock, err := lock()
	if err != nil {
		return nil, fmt.Errorf("sysdeps: lock %s: %w", lockPath, err)
	}
	defer unlock()

	// Another process may have installed them while this one waited.
	if paths, missing = locate(reqs); len(missing) == 0 {
		return paths, nil
	}
	pkgs := packages(missing)
	log("installing missing packages: %s", strings.Join(pkgs, " "))
	if err := aptInstall(ctx, pkgs); err != nil {
		log("apt-get install failed (%v); refreshing the package lists and trying again", err)
		if err := apt(ctx, "update", "-q"); err != nil {
			return nil, &MissingError{Missing: missing, Reason: "apt-get update failed: " + err.Error()}
		}
		if err := aptInstall(ctx, pkgs); err != nil {
			return nil, &MissingError{Missing: missing, Reason: "apt-get install failed: " + err.Error()}
		}
	}
	if paths, missing = locate(reqs); len(missing) > 0 {
		return nil, &MissingError{Missing: missing, Reason: "still missing after apt-get install"}
	}
	return paths, nil
}

func locate(reqs []Requirement) (paths []string, missing []Requirement) {
	paths = make([]string, len(reqs))
	for i, r := range reqs {
		p, err := r.find()
		if err != nil {
			missing = append(missing, r)
			continue
		}
		paths[i] = p
	}
	return paths, missing
}

func packages(reqs []Requirement) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range reqs {
		if !seen[r.Package] {
			seen[r.Package] = true
			out = append(out, r.Package)
		}
	}
	sort.Strings(out)
	return out
}

func aptInstall(ctx context.Context, pkgs []string) error {
	return apt(ctx, append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)...)
}

func apt(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(tail))
	}
	return nil
}

// lock takes the install lock exclusively; the returned function gives it
// back.
func lock() (func(), error) { return flock(syscall.LOCK_EX) }

// waitForInstall returns once no process holds the install lock: it takes
// the lock shared and gives it back at once. A caller that cannot create
// the lock file (not root, and none exists) has nobody to wait for.
func waitForInstall() error {
	unlock, err := flock(syscall.LOCK_SH)
	if errors.Is(err, os.ErrPermission) {
		return nil
	}
	if err != nil {
		return err
	}
	unlock()
	return nil
}

func flock(how int) (func(), error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// PostgreSQLBinDir returns the directory holding the PostgreSQL server
// programs (initdb, pg_ctl, postgres): the one on PATH when initdb is there,
// otherwise the newest /usr/lib/postgresql/<version>/bin, where Debian
// installs them without putting them on PATH.
func PostgreSQLBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", errors.New("initdb not found on PATH or under /usr/lib/postgresql")
	}
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	return filepath.Dir(matches[0]), nil
}

func versionOf(initdb string) int {
	v := filepath.Base(filepath.Dir(filepath.Dir(initdb)))
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// PostgreSQL is the requirement for the PostgreSQL server programs.
var PostgreSQL = Requirement{
	Program: "initdb",
	Package: "postgresql",
	Find: func() (string, error) {
		dir, err := PostgreSQLBinDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, "initdb"), nil
	},
}

// Dovecot is the requirement for the Dovecot IMAP server.
var Dovecot = Requirement{
	Program: "dovecot",
	Package: "dovecot-imapd",
	Find: func() (string, error) {
		if p, err := exec.LookPath("dovecot"); err == nil {
			return p, nil
		}
		if _, err := os.Stat("/usr/sbin/dovecot"); err == nil {
			return "/usr/sbin/dovecot", nil
		}
		return "", errors.New("dovecot not found")
	},
}

// Library is the requirement for the shared library soname (for example
// "libxapian.so.30"), which the Debian package pkg installs. It is found
// in the directories Debian installs libraries into: /usr/lib and /lib,
// and their multiarch subdirectories such as /usr/lib/x86_64-linux-gnu. It
// does not ask the dynamic linker's cache, so a library installed
// elsewhere and named in /etc/ld.so.conf counts as missing.
func Library(soname, pkg string) Requirement {
	return Requirement{
		Program: soname,
		Package: pkg,
		Find: func() (string, error) {
			for _, pattern := range []string{"/usr/lib/*/", "/lib/*/", "/usr/lib/", "/lib/"} {
				matches, _ := filepath.Glob(pattern + soname)
				if len(matches) > 0 {
					return matches[0], nil
				}
			}
			return "", fmt.Errorf("%s not found under /usr/lib or /lib", soname)
		},
	}
}

// Download fetches the .deb files of pkgs, in the versions apt-get would
// install, into dir with `apt-get download`, and returns their paths in
// the order of pkgs. It installs nothing: it is for a package that cannot
// be installed beside another one (Debian's cyrus-imapd conflicts with
// dovecot-imapd) and is unpacked by its caller instead. When the download
// fails as root it refreshes the package lists, holding the install lock,
// and tries once more. Output of apt-get goes to log, which may be nil.
func Download(ctx context.Context, log func(format string, args ...any), dir string, pkgs ...string) ([]string, error) {
	if log == nil {
		log = func(string, ...any) {}
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return nil, fmt.Errorf("sysdeps: download %s: apt-get is not available", strings.Join(pkgs, " "))
	}
	download := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"download", "-q"}, pkgs...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get download %s: %w: %s", strings.Join(pkgs, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	log("downloading packages: %s", strings.Join(pkgs, " "))
	err := download()
	if err != nil && os.Geteuid() == 0 {
		log("%v; refreshing the package lists and trying again", err)
		unlock, lerr := lock()
		if lerr != nil {
			return nil, fmt.Errorf("sysdeps: lock %s: %w", lockPath, lerr)
		}
		err = apt(ctx, "update", "-q")
		unlock()
		if err != nil {
			return nil, fmt.Errorf("sysdeps: apt-get update: %w", err)
		}
		err = download()
	}
	if err != nil {
		return nil, fmt.Errorf("sysdeps: %w", err)
	}
	paths := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		matches, _ := filepath.Glob(filepath.Join(dir, pkg+"_*.deb"))
		if len(matches) != 1 {
			return nil, fmt.Errorf("sysdeps: apt-get download left %d files for %s in %s", len(matches), pkg, dir)
		}
		paths[i] = matches[0]
	}
	return paths, nil
}
