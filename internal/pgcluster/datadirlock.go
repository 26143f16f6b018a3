package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrInUse reports a data directory that a live process is running with
// Start, or preparing with Init.
var ErrInUse = errors.New("data directory in use by another process")

// dataDirLock is the exclusive flock on DataDir + ".lock" that a process
// holds from Start to Stop. The kernel drops it when the process dies, which
// is how a later Start or StopOrphan tells a server left behind by a dead
// process from one that a live process is using.
type dataDirLock struct{ f *os.File }

// lockDataDir takes the lock without waiting; a lock held elsewhere is
// reported as ErrInUse with the holder's PID.
func lockDataDir(path string) (*dataDirLock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("pgcluster: %s: %w (locked by pid %s)", path, ErrInUse, strings.TrimSpace(string(owner)))
		}
		return nil, fmt.Errorf("pgcluster: lock %s: %w", path, err)
	}
	// The PID is informational: only the flock matters.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &dataDirLock{f: f}, nil
}

// unlock releases the lock; the file stays, since removing a lock file
// races with processes that have it open. The lock is released explicitly
// before the file is closed: a child that another goroutine is forking at
// that moment shares the open file until it execs, and closing alone would
// leave the lock held until then.
func (l *dataDirLock) unlock() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
}
