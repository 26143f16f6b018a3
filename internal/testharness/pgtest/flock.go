package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// openLock opens (creating) the lock file at path.
func openLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pgtest: lock file: %w", err)
	}
	return f, nil
}

// tryLock takes an exclusive flock on f without waiting and reports whether
// it got it.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return false, fmt.Errorf("pgtest: flock %s: %w", f.Name(), err)
}

// lockWait takes an exclusive flock on the file at path, waiting until ctx
// is done. Closing the returned file releases it.
func lockWait(ctx context.Context, path string) (*os.File, error) {
	f, err := openLock(path)
	if err != nil {
		return nil, err
	}
	for {
		ok, err := tryLock(f)
		if ok || err != nil {
			if err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("pgtest: wait for lock %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
