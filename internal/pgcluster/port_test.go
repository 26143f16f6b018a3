package pgcluster

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPortTaken(t *testing.T) {
	t.Parallel()
	require.True(t, portTaken(`LOG:  could not bind IPv4 address "127.0.0.1": Address already in use`))
	require.True(t, portTaken(`FATAL:  lock file "/tmp/.s.PGSQL.5432.lock" already exists`))
	require.False(t, portTaken(`FATAL:  could not create lock file "/s/.s.PGSQL.5432.lock": Permission denied`))
	require.False(t, portTaken(`FATAL:  lock file "postmaster.pid" already exists`))
}

// TestExplicitTakenPortFails checks that a port given in Options is not
// replaced, and that the error quotes the server log.
func TestExplicitTakenPortFails(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	_, err = Start(context.Background(), Options{
		DataDir:   filepath.Join(testDir(t), "data"),
		Port:      l.Addr().(*net.TCPAddr).Port,
		ListenTCP: true,
	})
	require.ErrorContains(t, err, "Address already in use")
}

// TestPickedTakenPortIsRetried makes the first picked port a taken one.
// It replaces pickPort, so it does not run in parallel.
func TestPickedTakenPortIsRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	calls := 0
	pickPort = func() (int, error) {
		calls++
		if calls == 1 {
			return taken, nil
		}
		return freePort()
	}
	defer func() { pickPort = freePort }()

	rec := &logRecorder{tb: t}
	cl := startCluster(t, Options{DataDir: filepath.Join(testDir(t), "data"), ListenTCP: true, Logf: rec.logf})
	require.NotEqual(t, taken, cl.Port())
	require.Equal(t, 2, calls)
	require.True(t, rec.contains("is taken; trying another"))
	url, err := cl.TCPConnString("postgres")
	require.NoError(t, err)
	require.Equal(t, "1", queryString(t, url, "select 1::text"))
}
