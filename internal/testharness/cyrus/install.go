package cyrus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mailfathom/mailfathom/internal/sysdeps"
)

// packages are the Debian packages unpacked into the cache rather than
// installed: cyrus-imapd conflicts with dovecot-imapd (both provide
// imap-server), and cyrus-common, which the two are released together
// with, would bring a mail transport agent, a system cyrus user, files in
// /etc and a system service on the standard ports.
var packages = []string{"cyrus-imapd", "cyrus-common"}

// systemCache is where a root test process unpacks the packages, and where
// any process looks first.
const systemCache = "/var/cache/mailfathom-cyrus"

// completeFile marks a cache whose unpacking finished; it holds the names
// of the unpacked .deb files.
const completeFile = "complete"

// requirements are what the unpacked programs need from the system: the
// shared libraries the Debian 12 build of Cyrus IMAP 3.6 links that a
// minimal system may lack (their dependencies arrive with them), the SASL
// mechanisms and sasldb plugins, and saslpasswd2, which writes the sasldb.
// sysdeps installs the missing ones with apt-get.
var requirements = []sysdeps.Requirement{
	sysdeps.Library("libical.so.3", "libical3"),
	sysdeps.Library("libicui18n.so.72", "libicu72"),
	sysdeps.Library("libjansson.so.4", "libjansson4"),
	sysdeps.Library("libkrb5.so.3", "libkrb5-3"),
	sysdeps.Library("libpcreposix.so.3", "libpcre3"),
	sysdeps.Library("libpq.so.5", "libpq5"),
	sysdeps.Library("libsasl2.so.2", "libsasl2-2"),
	sysdeps.Library("libsqlite3.so.0", "libsqlite3-0"),
	sysdeps.Library("libssl.so.3", "libssl3"),
	sysdeps.Library("libwrap.so.0", "libwrap0"),
	sysdeps.Library("libxapian.so.30", "libxapian30"),
	sysdeps.Library("libxml2.so.2", "libxml2"),
	sysdeps.Library("sasl2/libscram.so.2", "libsasl2-modules"),
	sysdeps.Library("sasl2/libsasldb.so.2", "libsasl2-modules-db"),
	saslPasswd,
}

// saslPasswd is the requirement for saslpasswd2, last in requirements.
var saslPasswd = sysdeps.Requirement{
	Program: "saslpasswd2",
	Package: "sasl2-bin",
	Find: func() (string, error) {
		if p, err := exec.LookPath("saslpasswd2"); err == nil {
			return p, nil
		}
		if _, err := os.Stat("/usr/sbin/saslpasswd2"); err == nil {
			return "/usr/sbin/saslpasswd2", nil
		}
		return "", errors.New("saslpasswd2 not found")
	},
}

// installation is an unpacked Cyrus IMAP.
type installation struct {
	// bin holds master, imapd, idled and the tools (usr/lib/cyrus/bin).
	bin string
	// libDir holds the libcyrus libraries, for LD_LIBRARY_PATH.
	libDir string
	// saslpasswd is the system's saslpasswd2.
	saslpasswd string
	// debs names the unpacked package files, which carry their versions.
	debs string
}

func (i installation) program(name string) string { return filepath.Join(i.bin, name) }

// env is the environment Cyrus's programs run with.
func (i installation) env() []string {
	return []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TZ=UTC", "LD_LIBRARY_PATH=" + i.libDir}
}

var installed struct {
	once sync.Once
	inst installation
	err  error
}

// install returns the unpacked Cyrus IMAP, installing its system
// requirements and unpacking it on the first call of the process. It fails,
// never skips, when something is missing and cannot be installed.
func install(logf func(string, ...any)) (installation, error) {
	installed.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		installed.inst, installed.err = installOnce(ctx, logf)
	})
	return installed.inst, installed.err
}

func installOnce(ctx context.Context, logf func(string, ...any)) (installation, error) {
	paths, err := sysdeps.Ensure(ctx, logf, requirements...)
	if err != nil {
		return installation{}, err
	}
	root, debs, err := unpacked(ctx, logf)
	if err != nil {
		return installation{}, err
	}
	libs, _ := filepath.Glob(filepath.Join(root, "usr/lib/*/libcyrus_imap.so.0"))
	if len(libs) != 1 {
		return installation{}, fmt.Errorf("cyrus: no libcyrus_imap.so.0 in %s", root)
	}
	inst := installation{
		bin:        filepath.Join(root, "usr/lib/cyrus/bin"),
		libDir:     filepath.Dir(libs[0]),
		saslpasswd: paths[len(paths)-1],
		debs:       debs,
	}
	if err := inst.checkLinks(ctx); err != nil {
		return installation{}, err
	}
	return inst, nil
}

// unpacked returns the directory the packages are unpacked in and the
// names of their files: the system cache when it is complete, otherwise
// the cache this process may write (the system one as root, one in the
// temporary directory per user otherwise), unpacking into it first. A
// file lock beside the cache keeps parallel test binaries from unpacking
// twice or reading half an unpacking.
func unpacked(ctx context.Context, logf func(string, ...any)) (root, debs string, err error) {
	if names, err := os.ReadFile(filepath.Join(systemCache, completeFile)); err == nil {
		return filepath.Join(systemCache, "root"), strings.TrimSpace(string(names)), nil
	}
	cache := systemCache
	if os.Geteuid() != 0 {
		cache = filepath.Join(os.TempDir(), fmt.Sprintf("mailfathom-cyrus-%d", os.Geteuid()))
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", "", fmt.Errorf("cyrus: create cache: %w", err)
	}
	unlock, err := lockFile(cache + ".lock")
	if err != nil {
		return "", "", fmt.Errorf("cyrus: lock cache: %w", err)
	}
	defer unlock()
	root = filepath.Join(cache, "root")
	if names, err := os.ReadFile(filepath.Join(cache, completeFile)); err == nil {
		return root, strings.TrimSpace(string(names)), nil
	}

	for _, dir := range []string{"debs", "root", "root.tmp"} {
		if err := os.RemoveAll(filepath.Join(cache, dir)); err != nil {
			return "", "", fmt.Errorf("cyrus: clear cache: %w", err)
		}
	}
	debDir := filepath.Join(cache, "debs")
	if err := os.Mkdir(debDir, 0o755); err != nil {
		return "", "", fmt.Errorf("cyrus: create cache: %w", err)
	}
	files, err := sysdeps.Download(ctx, logf, debDir, packages...)
	if err != nil {
		return "", "", fmt.Errorf("cyrus: %w", err)
	}
	if err := sameVersion(files); err != nil {
		return "", "", err
	}
	tmp := filepath.Join(cache, "root.tmp")
	for _, f := range files {
		out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", f, tmp).CombinedOutput()
		if err != nil {
			return "", "", fmt.Errorf("cyrus: dpkg-deb -x %s: %w: %s", filepath.Base(f), err, strings.TrimSpace(string(out)))
		}
	}
	if err := os.Rename(tmp, root); err != nil {
		return "", "", fmt.Errorf("cyrus: %w", err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	debs = strings.Join(names, " ")
	if err := os.WriteFile(filepath.Join(cache, completeFile), []byte(debs+"\n"), 0o644); err != nil {
		return "", "", fmt.Errorf("cyrus: %w", err)
	}
	logf("cyrus: unpacked %s into %s", debs, root)
	return root, debs, nil
}

// sameVersion checks that the downloaded .deb files (name_version_arch.deb)
// are of one version: cyrus-imapd depends on exactly its cyrus-common.
func sameVersion(files []string) error {
	var versions []string
	for _, f := range files {
		parts := strings.Split(filepath.Base(f), "_")
		if len(parts) != 3 {
			return fmt.Errorf("cyrus: unexpected package file name %s", filepath.Base(f))
		}
		versions = append(versions, parts[1])
	}
	if len(slices.Compact(slices.Clone(versions))) != 1 {
		return fmt.Errorf("cyrus: packages of different versions downloaded: %v", files)
	}
	return nil
}

// checkLinks runs ldd on the programs the harness starts and fails, naming
// each library and the package that provides it where known, when the
// dynamic linker cannot find one: a Debian release whose Cyrus links a
// library requirements does not list fails here rather than at start.
func (i installation) checkLinks(ctx context.Context) error {
	var missing []string
	for _, prog := range []string{"master", "imapd", "idled", "ctl_cyrusdb"} {
		cmd := exec.CommandContext(ctx, "ldd", i.program(prog))
		cmd.Env = i.env()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("cyrus: ldd %s: %w: %s", prog, err, strings.TrimSpace(string(out)))
		}
		for _, line := range strings.Split(string(out), "\n") {
			if lib, ok := strings.CutSuffix(strings.TrimSpace(line), " => not found"); ok && !slices.Contains(missing, lib) {
				missing = append(missing, lib)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	for n, lib := range missing {
		for _, r := range requirements {
			if r.Program == lib {
				missing[n] = lib + " (package " + r.Package + ")"
			}
		}
	}
	return fmt.Errorf("cyrus: the unpacked programs (%s) need libraries that are not installed: %s", i.debs, strings.Join(missing, ", "))
}

// lockFile takes an exclusive lock on path, creating it; the returned
// function gives it back.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
