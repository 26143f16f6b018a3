package sasl_test

import (
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/sasl"
)

func TestEmptyResponseConn(t *testing.T) {
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	fix := sasl.FixEmptyResponses(client)

	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(server)
		got <- string(b)
	}()
	for _, w := range []string{"A1 AUTHENTICATE SCRAM-SHA-256 =\r\n", "=\r\n", "dj1hYmM=\r\n", "==\r\n"} {
		n, err := fix.Write([]byte(w))
		require.NoError(t, err)
		require.Equal(t, len(w), n)
	}
	fix.Stop()
	n, err := fix.Write([]byte("=\r\n"))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.NoError(t, client.Close())
	require.Equal(t, "A1 AUTHENTICATE SCRAM-SHA-256 =\r\n\r\ndj1hYmM=\r\n==\r\n=\r\n", <-got)
}
