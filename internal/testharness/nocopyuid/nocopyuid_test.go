package nocopyuid_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/nocopyuid"
)

// TestFilterLeavesLiteralsAlone: the COPYUID code and the capabilities the
// filter cannot read through are taken out of responses, and a literal
// that happens to hold the same text reaches the client byte for byte.
func TestFilterLeavesLiteralsAlone(t *testing.T) {
	t.Parallel()
	body := "a1 OK [COPYUID 1 2 3] x\r\n* CAPABILITY STARTTLS\r\n"
	answer := "* OK [CAPABILITY IMAP4rev1 STARTTLS COMPRESS=DEFLATE MOVE] ready\r\n" +
		"* 1 FETCH (UID 2 BODY[] {" + strconv.Itoa(len(body)) + "}\r\n" + body + ")\r\n" +
		"* OK [COPYUID 9 2 7] Moved UIDs.\r\n" +
		"a2 OK [COPYUID 9 3 8] Copy completed.\r\n" +
		"a3 OK Move completed.\r\n"
	want := "* OK [CAPABILITY IMAP4rev1 MOVE] ready\r\n" +
		"* 1 FETCH (UID 2 BODY[] {" + strconv.Itoa(len(body)) + "}\r\n" + body + ")\r\n" +
		"* OK Moved UIDs.\r\n" +
		"a2 OK Copy completed.\r\n" +
		"a3 OK Move completed.\r\n"

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// One byte at a time: the filter must not depend on how the
		// answer is cut into reads.
		for i := range len(answer) {
			if _, err := c.Write([]byte{answer[i]}); err != nil {
				return
			}
		}
	}()
	var f nocopyuid.Filter
	c, err := f.Dial(ln.Addr().String())(context.Background(), "tcp", "")
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, want, string(got))
	require.Equal(t, 2, f.Removed())
}

// TestDovecotBehindTheFilterNamesNoPlacement: Dovecot answers UID MOVE
// with COPYUID even when UIDPLUS is not advertised; through the proxy it
// names no placement, and the message is moved all the same.
func TestDovecotBehindTheFilterNamesNoPlacement(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t, dovecot.WithCapability(nocopyuid.Capabilities))
	user := srv.NewUser()
	user.CreateFolder("Filed")
	uid := user.Append("INBOX", []byte("Subject: x\r\n\r\nbody\r\n"), time.Now())

	p := nocopyuid.Start(t, srv.Addr())
	c, err := imapclient.DialInsecure(p.Addr(), nil)
	require.NoError(t, err)
	defer c.Close()
	require.True(t, c.Caps().Has(imap.CapMove))
	require.False(t, c.Caps().Has(imap.CapUIDPlus))
	require.NoError(t, c.Login(user.Name(), user.Password()).Wait())
	_, err = c.Select("INBOX", nil).Wait()
	require.NoError(t, err)
	data, err := c.Move(imap.UIDSetNum(uid), "Filed").Wait()
	require.NoError(t, err)
	require.Zero(t, data.UIDValidity, "no COPYUID reached the client")
	require.Equal(t, 1, p.Removed())
	require.NoError(t, c.Logout().Wait())
	require.NotContains(t, user.UIDs("INBOX"), uid)
	require.Len(t, user.UIDs("Filed"), 1)
}
