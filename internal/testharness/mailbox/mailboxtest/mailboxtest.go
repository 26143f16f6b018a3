// Package mailboxtest checks a server harness's User helpers, the
// operations of package mailbox wrapped to fail the test, against the
// harness's real server: what every harness must do alike. Each harness
// runs Run from its own tests and keeps there the checks of what its
// server does differently.
package mailboxtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/stretchr/testify/require"
)

// User is what Run needs of a harness's user: its helpers, and Dial for a
// connection of the test's own.
type User interface {
	Append(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) imap.UID
	SetFlags(folder string, uid imap.UID, add, remove []imap.Flag)
	Expunge(folder string, uids ...imap.UID)
	CreateFolder(folder string)
	DeleteFolder(folder string)
	RecreateFolder(folder string) uint32
	UIDValidity(folder string) uint32
	UIDNext(folder string) imap.UID
	HighestModSeq(folder string) uint64
	UIDs(folder string) []imap.UID
	Flags(folder string, uid imap.UID) []imap.Flag
	Message(folder string, uid imap.UID) *imapclient.FetchMessageBuffer
	Dial() *imapclient.Client
}

// Run runs the checks as parallel subtests of t, each with a user of its
// own from newUser, which gets the subtest: one with an empty INBOX, as
// NewUser makes.
func Run(t *testing.T, newUser func(t *testing.T) User) {
	for name, check := range map[string]func(t *testing.T, u User){
		"AppendThenFlags":       appendThenFlags,
		"FlagsReadsServerTruth": flagsReadsServerTruth,
		"FolderHelpers":         folderHelpers,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			check(t, newUser(t))
		})
	}
}

// Message returns a small message, numbered n in its subject, body and
// Message-ID <m{n}@mailfathom.test>.
func Message(n int) []byte {
	return fmt.Appendf(nil, "From: a@example.org\r\nTo: b@example.org\r\nSubject: message %d\r\nMessage-ID: <m%d@mailfathom.test>\r\n\r\nBody of message %d.\r\n", n, n, n)
}

func appendThenFlags(t *testing.T, u User) {
	date := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	uid := u.Append("INBOX", Message(1), date, imap.FlagFlagged)
	require.Equal(t, imap.UID(1), uid)
	require.Equal(t, []imap.Flag{imap.FlagFlagged}, u.Flags("INBOX", uid))

	u.SetFlags("INBOX", uid, []imap.Flag{imap.FlagSeen, "$Label1"}, []imap.Flag{imap.FlagFlagged})
	require.ElementsMatch(t, []imap.Flag{imap.FlagSeen, "$Label1"}, u.Flags("INBOX", uid))

	msg := u.Message("INBOX", uid)
	require.True(t, msg.InternalDate.Equal(date), "%v", msg.InternalDate)
	require.Equal(t, "m1@mailfathom.test", msg.Envelope.MessageID)
	require.Equal(t, Message(1), msg.FindBodySection(&imap.FetchItemBodySection{}))
	require.Equal(t, []imap.UID{1}, u.UIDs("INBOX"))
	require.Equal(t, imap.UID(2), u.UIDNext("INBOX"))
	require.NotZero(t, u.HighestModSeq("INBOX"))
}

func flagsReadsServerTruth(t *testing.T, u User) {
	uid := u.Append("INBOX", Message(1), time.Time{})
	c := u.Dial()
	_, err := c.Select("INBOX", nil).Wait()
	require.NoError(t, err)

	_, err = c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{{Peek: true}}}).Collect()
	require.NoError(t, err)
	require.Empty(t, u.Flags("INBOX", uid), "BODY.PEEK[] must not set \\Seen; \\Recent is left out")
	// Reading through the helper twice changes nothing either.
	require.Empty(t, u.Flags("INBOX", uid))
	require.Empty(t, u.Message("INBOX", uid).Flags)

	_, err = c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{{}}}).Collect()
	require.NoError(t, err)
	require.Contains(t, u.Flags("INBOX", uid), imap.FlagSeen, "BODY[] must set \\Seen")
}

func folderHelpers(t *testing.T, u User) {
	u.CreateFolder("Work/Clients")
	v1 := u.UIDValidity("Work/Clients")
	for i := range 3 {
		require.Equal(t, imap.UID(i+1), u.Append("Work/Clients", Message(i), time.Time{}))
	}
	u.Expunge("Work/Clients", 2)
	u.Expunge("Work/Clients")
	require.Equal(t, []imap.UID{1, 3}, u.UIDs("Work/Clients"))
	require.Equal(t, imap.UID(4), u.UIDNext("Work/Clients"))

	v2 := u.RecreateFolder("Work/Clients")
	require.NotEqual(t, v1, v2)
	require.Empty(t, u.UIDs("Work/Clients"))
	require.Equal(t, imap.UID(1), u.Append("Work/Clients", Message(9), time.Time{}))

	u.DeleteFolder("Work/Clients")
	_, err := u.Dial().Status("Work/Clients", &imap.StatusOptions{UIDValidity: true}).Wait()
	require.Error(t, err)
}
