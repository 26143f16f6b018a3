// Package faultproxy is a loopback TCP proxy that injects connection
// faults for resilience tests: cutting or stalling connections after an
// exact number of bytes, cutting or stalling all of them at once, and
// refusing new ones.
//
// A test starts a Proxy in front of a server, points the code under test
// at Proxy.Addr instead of the server, and arms faults while the code runs:
//
//	p := faultproxy.Start(t, srv.TLSAddr())
//	client := connect(p.Addr())
//	p.CutAfter(faultproxy.Existing, faultproxy.ServerToClient, 10_000)
//	_, err := client.FetchEverything() // fails 10 000 bytes into the reply
//
// The proxy forwards bytes, not protocol units, so it works the same for
// TLS: a fault after n bytes hits the TLS record stream, and a client
// dialing the proxy's 127.0.0.1 address verifies the server's certificate
// for 127.0.0.1 as if it had dialed the server.
//
// Shape makes later connections behave like a long, narrow path: a fixed
// one-way latency and a throughput cap per direction (Link), pipelined as
// on a real network, so a benchmark can measure what a slow link costs:
//
//	p.Shape(faultproxy.Both, faultproxy.Link{Latency: 20 * time.Millisecond, BytesPerSecond: 12_500_000})
//
// What it deliberately does not do: vary latency (no jitter), lose
// packets, corrupt or reorder bytes, half-close (a connection whose either side
// closes or fails is closed on both sides), send TCP resets (closing is a
// FIN), or listen anywhere but 127.0.0.1.
package faultproxy
