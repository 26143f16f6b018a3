package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/gmailtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

const gmailCormorants = "From: Harbour Master <master@example.test>\r\n" +
	"To: Dock Office <office@example.test>\r\n" +
	"Subject: Cormorants on the breakwater\r\n" +
	"Message-ID: <cormorants@example.test>\r\n" +
	"Date: Tue, 03 Jun 2025 09:00:00 +0000\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n\r\n" +
	"Forty cormorants are nesting on the breakwater again.\r\n"

// TestGmailMessageInThreeFoldersEndToEnd runs `serve` against a Gmail-like
// server (package gmailtest) with one message labelled \Inbox and Work, so
// shown in [Gmail]/All Mail, INBOX and Work, all three configured: the
// message is stored once — one raw MIME, three occurrences — and
// `mailfathom search` finds it once.
func TestGmailMessageInThreeFoldersEndToEnd(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.Database(t)
	srv := gmailtest.Start(t)
	srv.Deliver([]byte(gmailCormorants), gmailtest.LabelInbox, "Work")
	u := srv.User()
	dir := t.TempDir()
	password := filepath.Join(dir, "imap-password")
	require.NoError(t, os.WriteFile(password, []byte(u.Password()+"\n"), 0o600))
	env := serveEnv(dbURL)
	for k, v := range map[string]string{
		"ID":       "gmail",
		"HOST":     srv.Host(),
		"PORT":     strconv.Itoa(srv.Port()),
		"USERNAME": u.Name(),
		"PASSWORD": "file:" + password,
		// The test server listens in the clear, on loopback.
		"CONNECTION_SECURITY":       "None",
		"ALLOW_INSECURE_CONNECTION": "true",
		"ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION": "true",
		"FOLDERS_0_ALIAS":       "all",
		"FOLDERS_0_REMOTE_PATH": gmailtest.AllMail,
		"FOLDERS_1_ALIAS":       "inbox",
		"FOLDERS_1_REMOTE_PATH": "INBOX",
		"FOLDERS_2_ALIAS":       "work",
		"FOLDERS_2_REMOTE_PATH": "Work",
	} {
		env["MAILFATHOM_ACCOUNTS_0_"+k] = v
	}
	p := startServe(t, "serve", dir, env)
	pool, err := newPool(dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	poll.Until(t, 30*time.Second, "every folder's pass finishes", func() (bool, string) {
		n := p.count("folder pass finished")
		return n >= 3, fmt.Sprintf("%d passes finished; log:\n%s", n, tailLines(p.rawLog(), 30))
	})

	counts := dbassert.Counts(t, pool)
	require.Equal(t, 1, counts.Contents, "one raw MIME")
	require.Equal(t, 3, counts.Occurrences, "an occurrence per folder")
	holders := 0
	folders := map[int64]bool{}
	for _, o := range dbassert.Occurrences(t, pool, "") {
		if o.SharedEmailID == nil {
			holders++
		}
		folders[o.FolderID] = true
	}
	require.Equal(t, 1, holders)
	require.Equal(t, 1, counts.Served)
	require.Len(t, folders, 3)
	p.stop(t)

	cmd := exec.Command(binary(t), "search", "cormorants")
	cmd.Env = fromEnv(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 2, "a header and one hit:\n%s", stdout.String())
	require.Contains(t, lines[1], "Cormorants on the breakwater")
}
