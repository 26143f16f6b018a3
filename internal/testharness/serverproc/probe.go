package serverproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// ErrAnotherServer reports that Probe was greeted by another server than
// the one it looked for: a process that took the port first.
var ErrAnotherServer = errors.New("another server answers")

// Probe dials the IMAP listener at addr and reads its greeting, the first
// line starting "* OK [CAPABILITY ", after any other "* OK" lines a server
// sends while it starts (Dovecot's "Waiting for authentication process to
// respond.."). It then logs out and returns nil when own accepts the line
// (without CRLF), and ErrAnotherServer naming the line otherwise. It
// sends no other command, so a probe logs nobody in.
func Probe(ctx context.Context, addr string, own func(greeting string) bool) error {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("read greeting at %s: %w", addr, err)
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "* OK [CAPABILITY ") {
			_, _ = conn.Write([]byte("x LOGOUT\r\n"))
			if !own(line) {
				return fmt.Errorf("%w at %s: %q", ErrAnotherServer, addr, line)
			}
			return nil
		}
		if !strings.HasPrefix(line, "* OK") {
			return fmt.Errorf("%w at %s: %q", ErrAnotherServer, addr, line)
		}
	}
}
