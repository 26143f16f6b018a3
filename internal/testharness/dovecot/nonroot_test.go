package dovecot_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/nonroot"
)

// TestRunsWithoutRoot checks the configuration for a test that is not
// root, in which every Dovecot process runs as the current user: directly
// when the test is not root, otherwise by running a copy of this test
// binary as nobody.
func TestRunsWithoutRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 || nonroot.Child() {
		s := dovecot.Start(t)
		u := s.AddUser("unprivileged", "pw")
		uid := u.Append("INBOX", message(1), time.Time{}, imap.FlagSeen)
		require.Equal(t, []imap.Flag{imap.FlagSeen}, u.Flags("INBOX", uid))
		require.Equal(t, []imap.UID{2, 3}, u.SeedMaildir("INBOX", []dovecot.SeedMessage{{Raw: message(2)}, {Raw: message(3)}}))
		u.Dial()
		st, err := os.Stat(filepath.Join(u.Home(), "Maildir", "INBOX"))
		require.NoError(t, err)
		require.Equal(t, uint32(os.Geteuid()), st.Sys().(*syscall.Stat_t).Uid)
		return
	}
	nonroot.Rerun(t)
}
