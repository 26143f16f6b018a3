package pgcluster

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnlockReleasesWhileAnotherGoroutineForks: a child being forked shares
// the process's open files until it execs; the lock must be free as soon as
// unlock returns all the same, or a Stop followed at once by a Start or
// StopOrphan finds its own data directory in use.
func TestUnlockReleasesWhileAnotherGoroutineForks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data.lock")
	stop := make(chan struct{})
	forking := make(chan struct{})
	go func() {
		defer close(forking)
		for {
			select {
			case <-stop:
				return
			default:
				_ = exec.Command("true").Run()
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-forking
	})

	for range 300 {
		l, err := lockDataDir(path)
		require.NoError(t, err, "unlock left the lock held")
		l.unlock()
	}
}
