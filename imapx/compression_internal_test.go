package imapx

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWantsCompression: what each policy decides for each kind of address
// the connection reached.
func TestWantsCompression(t *testing.T) {
	t.Parallel()
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 993} }
	for _, tc := range []struct {
		policy CompressionPolicy
		remote net.Addr
		ask    bool
		reason string
	}{
		{CompressionOff, tcp("203.0.113.7"), false, CompressionReasonConfiguredOff},
		{"", tcp("203.0.113.7"), false, CompressionReasonConfiguredOff},
		{CompressionOn, tcp("127.0.0.1"), true, CompressionReasonConfiguredOn},
		{CompressionAuto, tcp("127.0.0.1"), false, CompressionReasonLoopback},
		{CompressionAuto, tcp("::1"), false, CompressionReasonLoopback},
		{CompressionAuto, tcp("::ffff:127.0.0.1"), false, CompressionReasonLoopback},
		{CompressionAuto, tcp("169.254.10.1"), false, CompressionReasonLinkLocal},
		{CompressionAuto, tcp("fe80::1"), false, CompressionReasonLinkLocal},
		{CompressionAuto, tcp("10.0.0.8"), false, CompressionReasonPrivateNetwork},
		{CompressionAuto, tcp("172.16.5.5"), false, CompressionReasonPrivateNetwork},
		{CompressionAuto, tcp("192.168.1.20"), false, CompressionReasonPrivateNetwork},
		{CompressionAuto, tcp("fd12:3456::1"), false, CompressionReasonPrivateNetwork},
		{CompressionAuto, tcp("172.32.0.1"), true, CompressionReasonPublicAddress},
		{CompressionAuto, tcp("2001:db8::1"), true, CompressionReasonPublicAddress},
		{CompressionAuto, tcp("142.250.27.108"), true, CompressionReasonPublicAddress},
		{CompressionAuto, &net.UnixAddr{Name: "/run/imap.sock", Net: "unix"}, true, CompressionReasonUnknownAddress},
		{CompressionAuto, nil, true, CompressionReasonUnknownAddress},
	} {
		ask, reason := wantsCompression(tc.policy, tc.remote)
		require.Equal(t, tc.ask, ask, "%s %v", tc.policy, tc.remote)
		require.Equal(t, tc.reason, reason, "%s %v", tc.policy, tc.remote)
	}
}
