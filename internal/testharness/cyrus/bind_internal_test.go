package cyrus

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPortTakenByAnotherProcess: a restart whose port another process
// took fails, saying master could not bind (it tells only syslog, by its
// exit status); a first start in the same situation moves to other ports.
func TestPortTakenByAnotherProcess(t *testing.T) {
	t.Parallel()
	in, err := newInstance(t.Logf, defaultOptions())
	require.NoError(t, err)
	t.Cleanup(in.close)
	in.stop()
	ln, err := net.Listen("tcp", in.params.tlsAddr)
	require.NoError(t, err)
	defer ln.Close()

	err = in.start(false)
	require.ErrorContains(t, err, "could not bind free ports in 1 attempts")

	// A first start retries: simulate the race by handing the taken port
	// to the attempt that picks ports, once.
	taken := in.params.tlsAddr
	in.params.plainAddr, in.params.tlsAddr = "", ""
	first := true
	in.pickAddrs = func(hosts ...string) ([]string, error) {
		addrs, err := freeAddrs(hosts...)
		if first && err == nil {
			first = false
			addrs[1] = taken
		}
		return addrs, err
	}
	require.NoError(t, in.start(true))
	require.NotEqual(t, taken, in.params.tlsAddr)
	require.NoError(t, probe(t.Context(), in.params.plainAddr, in.params.greeting()))
}
