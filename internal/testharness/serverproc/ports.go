package serverproc

import (
	"net"
	"strconv"
)

// FreeAddrs returns one host:port per host, each with a port that was free
// a moment ago; all are held open together so no two are the same.
// Another process may take a port before the server binds it: a
// Supervisor retries then.
func FreeAddrs(hosts ...string) ([]string, error) {
	var addrs []string
	for _, host := range hosts {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// Port returns the port of the host:port addr, or 0 when it has none.
func Port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}
