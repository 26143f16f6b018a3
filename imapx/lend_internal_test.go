package imapx

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGateLendsOnlyBetweenResponses: a command's completion reaches
// go-imap's caller before go-imap has read its line ending, so the gate
// lends the stream only once go-imap's reader has ended that response;
// while lent, what go-imap's pending read brings is the borrower's, and
// what the borrower read past its answer is go-imap's again.
func TestGateLendsOnlyBetweenResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, server := net.Pipe()
		g := newGate(client)
		read := make(chan string, 8)
		go func() {
			// go-imap's reader: a deadline while it reads a response,
			// none once it has ended one.
			defer close(read)
			br := bufio.NewReader(g)
			for {
				_ = g.SetReadDeadline(time.Now().Add(time.Hour))
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				read <- line
				_ = g.SetReadDeadline(time.Time{})
			}
		}()
		write := func(s string) {
			_, err := io.WriteString(server, s)
			require.NoError(t, err)
		}
		write("* OK ready\r\n")
		require.Equal(t, "* OK ready\r\n", <-read)
		write("T1 OK done")

		lent := make(chan net.Conn, 1)
		go func() {
			c, err := g.lend(context.Background(), time.Hour)
			if err == nil {
				lent <- c
			}
			close(lent)
		}()
		synctest.Wait()
		require.Empty(t, lent, "lent while go-imap had not read its response's line ending")
		write("\r\n")
		require.Equal(t, "T1 OK done\r\n", <-read)
		c := <-lent
		require.NotNil(t, c)

		// The server's side reports what it read and answers; the test
		// checks it on its own goroutine.
		done := make(chan struct{})
		asked := make(chan string, 1)
		go func() {
			defer close(done)
			cmd, err := bufio.NewReader(server).ReadString('\n')
			if err != nil {
				cmd = "read failed: " + err.Error()
			}
			asked <- cmd
			_, _ = io.WriteString(server, "R1 OK\r\n* 3 EXISTS\r\n")
		}()
		_, err := io.WriteString(c, "R1 NOOP\r\n")
		require.NoError(t, err)
		require.Equal(t, "R1 NOOP\r\n", <-asked)
		br := bufio.NewReader(c)
		answer, err := br.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "R1 OK\r\n", answer)
		<-done
		synctest.Wait()
		require.Empty(t, read, "go-imap reads nothing while the stream is lent")
		rest, _ := br.Peek(br.Buffered())
		g.giveBack(rest)
		require.Equal(t, "* 3 EXISTS\r\n", <-read)

		_ = server.Close()
		_ = client.Close()
		for range read {
		}
	})
}
