package imapx

import (
	"net"
	"net/netip"
)

// CompressionPolicy says when a read session's main connection, the one
// that fetches message content, asks for COMPRESS=DEFLATE (RFC 4978). The
// zero value is CompressionOff.
type CompressionPolicy string

const (
	// CompressionOff never asks.
	CompressionOff CompressionPolicy = "off"
	// CompressionOn asks whenever the server advertises COMPRESS=DEFLATE.
	CompressionOn CompressionPolicy = "on"
	// CompressionAuto asks only where compression can pay: not when the
	// connection reaches the server at a loopback, link-local or private
	// address (RFC 1918, and RFC 4193's unique local IPv6 addresses),
	// where the link is fast enough that deflating and inflating cost
	// both ends more CPU than the bytes saved are worth; otherwise as
	// CompressionOn. The address decided on is the one the connection
	// actually reached, after name resolution.
	//
	// A server reached through a local tunnel or proxy (stunnel, an SSH
	// forward) looks local; such an account sets CompressionOn.
	CompressionAuto CompressionPolicy = "auto"
)

// Compression is what a read session decided about COMPRESS=DEFLATE, and
// why. Reason is one of the Compression* reasons below: fixed text, never
// anything of the server's.
type Compression struct {
	// InUse reports that the main connection runs compressed.
	InUse bool
	// Reason says why it does or does not.
	Reason string
}

// The reasons a Compression gives.
const (
	CompressionReasonConfiguredOff  = "configured off"
	CompressionReasonConfiguredOn   = "configured on"
	CompressionReasonPublicAddress  = "the server is on a public address"
	CompressionReasonUnknownAddress = "the server's address is not an IP address"
	CompressionReasonLoopback       = "the server is on a loopback address"
	CompressionReasonLinkLocal      = "the server is on a link-local address"
	CompressionReasonPrivateNetwork = "the server is on a private network"
	CompressionReasonNotOffered     = "the server does not offer COMPRESS=DEFLATE"
	CompressionReasonRefused        = "the server refused COMPRESS"
)

// wantsCompression decides, for policy and the address the connection
// reached, whether to ask for COMPRESS=DEFLATE, and why.
func wantsCompression(policy CompressionPolicy, remote net.Addr) (bool, string) {
	switch policy {
	case CompressionOn:
		return true, CompressionReasonConfiguredOn
	case CompressionAuto:
	default:
		return false, CompressionReasonConfiguredOff
	}
	ip, ok := remoteIP(remote)
	switch {
	case !ok:
		// A test's in-memory pipe, say: nothing says the link is fast.
		return true, CompressionReasonUnknownAddress
	case ip.IsLoopback():
		return false, CompressionReasonLoopback
	case ip.IsLinkLocalUnicast():
		return false, CompressionReasonLinkLocal
	case ip.IsPrivate():
		return false, CompressionReasonPrivateNetwork
	}
	return true, CompressionReasonPublicAddress
}

// remoteIP returns the IP address of remote, an IPv4-mapped IPv6 address
// as the IPv4 address it maps.
func remoteIP(remote net.Addr) (netip.Addr, bool) {
	if remote == nil {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}
