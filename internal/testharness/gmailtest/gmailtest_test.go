package gmailtest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/gmailtest"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
)

type testBundle struct {
	ctx context.Context
	srv *gmailtest.Server
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &testBundle{ctx: ctx, srv: gmailtest.Start(t)}
}

func (b *testBundle) open(t *testing.T) *imapx.ReadSession {
	t.Helper()
	u := b.srv.User()
	password := u.Password()
	s, err := imapx.OpenReadSession(b.ctx, imapx.Endpoint{
		AccountID: "gmail", Host: b.srv.Host(), Port: b.srv.Port(), Security: imapx.None,
		Username: u.Name(), Password: func(context.Context) ([]byte, error) { return []byte(password), nil },
		AllowInsecureConnection: true, AllowClearTextOverUnencrypted: true,
	}, imapx.SessionOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestOneMessageInThreeFolders: a message delivered with \Inbox and a
// user label is shown in All Mail, INBOX and the label's folder under
// UIDs of each, with one X-GM-MSGID and its labels; the server offers
// Gmail's extension and no compression.
func TestOneMessageInThreeFolders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	filler := b.srv.Deliver(mailgen.Message(1, 0, 500))
	m := b.srv.Deliver(mailgen.Message(1, 1, 500), gmailtest.LabelInbox, "Work", `\Important`)
	require.NotEqual(t, filler.MsgID, m.MsgID)
	require.NotEqual(t, b.srv.UID(m, gmailtest.AllMail), b.srv.UID(m, "INBOX"), "another UID in each folder")

	s := b.open(t)
	require.Equal(t, imapx.GmailIdentity, s.IdentityScheme())
	require.False(t, s.Capabilities().Has("COMPRESS=DEFLATE"))
	for _, folder := range []string{gmailtest.AllMail, "INBOX", "Work"} {
		_, err := s.Examine(b.ctx, folder)
		require.NoError(t, err)
		uid := uint32(b.srv.UID(m, folder))
		ids, err := s.FetchIdentities(b.ctx, []uint32{uid})
		require.NoError(t, err)
		require.Equal(t, imapx.MessageIdentity{
			EmailID: "1278455344230334867", ThreadID: "1278455344230334867",
			Labels: []string{`\Inbox`, "Work", `\Important`},
		}, ids[uid], "in %s", folder)
	}
	require.Equal(t, 1, b.srv.Sessions())
}

// TestRemoveLabel: a removed label leaves the message's labels and its
// folder, and the other folders report the change since their last
// mod-sequence, with the flags as they were.
func TestRemoveLabel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.srv.Deliver(mailgen.Message(2, 1, 500), gmailtest.LabelInbox, "Work")
	all := uint32(b.srv.UID(m, gmailtest.AllMail))
	inbox := b.srv.UID(m, "INBOX")
	before := b.srv.User().HighestModSeq(gmailtest.AllMail)

	b.srv.RemoveLabel(m, "Work")
	require.Equal(t, []string{gmailtest.LabelInbox}, b.srv.Labels(m))
	require.Zero(t, b.srv.UID(m, "Work"))
	require.Empty(t, b.srv.User().UIDs("Work"))
	require.Contains(t, b.srv.User().UIDs("INBOX"), inbox)
	require.Empty(t, b.srv.User().Flags("INBOX", inbox))

	s := b.open(t)
	_, err := s.Examine(b.ctx, gmailtest.AllMail)
	require.NoError(t, err)
	changes, err := s.ReconcileChanges(b.ctx, before)
	require.NoError(t, err)
	require.Len(t, changes.Changed, 1)
	require.Equal(t, all, changes.Changed[0].UID)
	require.True(t, changes.Changed[0].HasLabels)
	require.Equal(t, []string{gmailtest.LabelInbox}, changes.Changed[0].Labels)
	require.Empty(t, changes.Changed[0].Flags)
}

// TestAddLabel: a label added shows the message in the label's folder
// under a new UID and the same X-GM-MSGID; a label without a folder only
// joins its labels.
func TestAddLabel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.srv.Deliver(mailgen.Message(3, 1, 500))
	b.srv.AddLabel(m, "Travel")
	b.srv.AddLabel(m, `\Starred`)
	require.Equal(t, []string{"Travel", `\Starred`}, b.srv.Labels(m))
	uid := uint32(b.srv.UID(m, "Travel"))
	require.NotZero(t, uid)

	s := b.open(t)
	_, err := s.Examine(b.ctx, "Travel")
	require.NoError(t, err)
	ids, err := s.FetchIdentities(b.ctx, []uint32{uid})
	require.NoError(t, err)
	require.Equal(t, imapx.MessageIdentity{
		EmailID: strconv.FormatUint(m.MsgID, 10), ThreadID: strconv.FormatUint(m.ThrID, 10),
		Labels: []string{"Travel", `\Starred`},
	}, ids[uid])
}
