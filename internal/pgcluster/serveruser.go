package pgcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// serverUserName is the account the server programs run as when this
// process is root. Debian's postgresql package creates it.
const serverUserName = "postgres"

// serverUser is the unprivileged account the server programs run as. A nil
// *serverUser means the current user, which is the case whenever the
// process is not root.
type serverUser struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32
}

// lookupServerUser returns nil when the process is not root, and otherwise
// the postgres account.
func lookupServerUser() (*serverUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serverUserName)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, and initdb refuses to run as root, but there is no %q account to run the server as (the postgresql package creates it): %w", serverUserName, err)
	}
	s := &serverUser{name: u.Username}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgcluster: account %q has a non-numeric uid %q or gid %q", u.Username, u.Uid, u.Gid)
	}
	s.uid, s.gid = uint32(uid), uint32(gid)
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("pgcluster: groups of account %q: %w", u.Username, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			s.groups = append(s.groups, uint32(n))
		}
	}
	return s, nil
}

// command returns a command that runs as s, in dir, with messages in
// English so that callers can recognise them.
func (s *serverUser) command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: s.uid, Gid: s.gid, Groups: s.groups},
		}
	}
	return cmd
}

// chown gives path to s; it does nothing when s is nil.
func (s *serverUser) chown(path string) error {
	if s == nil {
		return nil
	}
	if err := os.Lchown(path, int(s.uid), int(s.gid)); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// mkdir creates dir with mode 0700 for s. It reports whether it created it;
// an existing directory is left as it is.
func (s *serverUser) mkdir(dir string) (created bool, err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		if os.IsExist(err) {
			if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
				return false, nil
			}
		}
		return false, fmt.Errorf("pgcluster: %w", err)
	}
	return true, s.chown(dir)
}

// checkTraversable fails when s cannot enter dir because dir or one of its
// ancestors lacks the search permission for s. It reads the mode bits only
// (ACLs are not consulted). It does nothing when s is nil: the current user
// created or chose the directories and will get a plain error from the
// server programs.
func (s *serverUser) checkTraversable(dir string) error {
	if s == nil {
		return nil
	}
	var chain []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		chain = append(chain, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		p := chain[i]
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		perm := fi.Mode().Perm()
		var can bool
		switch {
		case st.Uid == s.uid:
			can = perm&0o100 != 0
		case s.inGroup(st.Gid):
			can = perm&0o010 != 0
		default:
			can = perm&0o001 != 0
		}
		if !can {
			return fmt.Errorf("pgcluster: this process is root, so the PostgreSQL server runs as user %q (initdb refuses to run as root), "+
				"but %q cannot enter %s (mode %v, owner uid %d) on the way to %s; "+
				"choose a directory every user can traverse, such as one under /var/lib or /tmp, or run as an unprivileged user",
				s.name, s.name, p, fi.Mode().Perm(), st.Uid, dir)
		}
	}
	return nil
}

func (s *serverUser) inGroup(gid uint32) bool {
	if gid == s.gid {
		return true
	}
	for _, g := range s.groups {
		if g == gid {
			return true
		}
	}
	return false
}
