package mailstore_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestReadThreadByServerThread: messages the server puts in one thread
// (X-GM-THRID) are one conversation though no header links them, oldest
// first, a message in two folders listed once; a message the server names
// no thread of is threaded by its headers.
func TestReadThreadByServerThread(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool := dbtest.Pool(t)

	all := bind(ctx, t, pool, "threaded", "ALL", "[Gmail]/All Mail")
	inbox := bind(ctx, t, pool, "threaded", "INBOX", "INBOX")
	day := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	uid := uint32(0)
	store := func(b mailstore.Binding, o mailstore.Occurrence) uuid.UUID {
		uid++
		o.AccountID, o.FolderID, o.UIDValidity, o.UID, o.Size = b.AccountID, b.ID, 1, uid, 1
		if o.SharedEmailID == uuid.Nil {
			o.Raw, o.Availability = []byte("x"), mailstore.Available
		} else {
			o.Availability = mailstore.Available
		}
		id, err := mailstore.UpsertOccurrence(ctx, pool, o)
		require.NoError(t, err)
		return id
	}
	const thread = "x-gm-thrid:1266894439832287888"
	reply := store(all, mailstore.Occurrence{MessageID: "<reply@x>", SentAt: day.Add(time.Hour),
		ServerEmailID: "x-gm-msgid:2", ServerThreadID: thread})
	first := store(all, mailstore.Occurrence{MessageID: "<first@x>", SentAt: day,
		ServerEmailID: "x-gm-msgid:1", ServerThreadID: thread})
	store(inbox, mailstore.Occurrence{ServerEmailID: "x-gm-msgid:1", ServerThreadID: thread, SharedEmailID: first})
	store(all, mailstore.Occurrence{MessageID: "<other@x>", SentAt: day, ServerEmailID: "x-gm-msgid:3",
		ServerThreadID: "x-gm-thrid:9"})
	elsewhere := bind(ctx, t, pool, "elsewhere", "ALL", "[Gmail]/All Mail")
	store(elsewhere, mailstore.Occurrence{MessageID: "<far@x>", SentAt: day, ServerEmailID: "x-gm-msgid:1",
		ServerThreadID: thread})

	ids := func(list []mailstore.EmailSummary) []uuid.UUID {
		out := []uuid.UUID{}
		for _, e := range list {
			out = append(out, e.ID)
		}
		return out
	}
	accounts := []string{"threaded", "elsewhere"}
	for _, id := range []uuid.UUID{first, reply} {
		list, found, err := mailstore.ReadThread(ctx, pool, accounts, id, 10)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, []uuid.UUID{first, reply}, ids(list), "the server's thread, oldest first, of its account only")
	}

	// Without a server thread, the headers thread.
	plain := bind(ctx, t, pool, "plain", "INBOX", "INBOX")
	root := store(plain, mailstore.Occurrence{MessageID: "<root@x>", SentAt: day})
	answer := store(plain, mailstore.Occurrence{MessageID: "<answer@x>", SentAt: day.Add(time.Hour),
		Extracted: &mailstore.Extracted{Readable: true, MessageID: "<answer@x>", InReplyTo: []string{"<root@x>"}}})
	store(plain, mailstore.Occurrence{MessageID: "<alone@x>", SentAt: day})
	list, found, err := mailstore.ReadThread(ctx, pool, []string{"plain"}, root, 10)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, []uuid.UUID{root, answer}, ids(list))
}
