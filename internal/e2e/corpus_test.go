package e2e

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
)

// corpus is what seedCorpus wrote: digests and sizes only, so a 350 MB
// corpus is never held in memory.
type corpus struct {
	folder string
	uids   []imap.UID
	sums   [][32]byte
	sizes  []int
	bytes  int64
}

// seedCorpus writes n generated prose messages into folder (straight into
// the Maildir, in chunks), message i of size mailgen.ReferenceSize/divisor,
// and returns their UIDs and SHA-256 digests. SeedMaildir writes exactly
// the bytes given, so the digests are those of the bytes the server serves.
func seedCorpus(t testing.TB, u *dovecot.User, folder string, n int, seed uint64, divisor int) corpus {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	return seedMessages(t, u, folder, n, func(i int) []byte {
		return mailgen.Message(seed, i, max(1, mailgen.ReferenceSize(rng)/divisor))
	})
}

// seedMessages writes message(i) for i in [0, n) into folder like
// seedCorpus.
func seedMessages(t testing.TB, u *dovecot.User, folder string, n int, message func(i int) []byte) corpus {
	t.Helper()
	c := corpus{folder: folder}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const chunk = 250
	for start := 0; start < n; start += chunk {
		msgs := make([]dovecot.SeedMessage, 0, chunk)
		for i := start; i < min(n, start+chunk); i++ {
			raw := message(i)
			c.sums = append(c.sums, sha256.Sum256(raw))
			c.sizes = append(c.sizes, len(raw))
			c.bytes += int64(len(raw))
			msgs = append(msgs, dovecot.SeedMessage{Raw: raw, InternalDate: base.Add(time.Duration(i) * time.Minute)})
		}
		c.uids = append(c.uids, u.SeedMaildir(folder, msgs)...)
	}
	require.Len(t, c.uids, n)
	return c
}

// String describes the corpus's shape.
func (c corpus) String() string {
	s := slices.Clone(c.sizes)
	slices.Sort(s)
	if len(s) == 0 {
		return "empty corpus"
	}
	q := func(p float64) int { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("%d messages, %.1f MB (mean %.1f KB, median %.1f KB, p99 %.2f MB, max %.2f MB)",
		len(s), float64(c.bytes)/1e6, float64(c.bytes)/float64(len(s))/1e3,
		float64(q(0.5))/1e3, float64(q(0.99))/1e6, float64(s[len(s)-1])/1e6)
}

// requireStored asserts that account's alias holds exactly the corpus: one
// occurrence per server UID, under the folder's UIDVALIDITY, each Available
// with the SHA-256 and length of the bytes the server holds.
func (b *testBundle) requireStored(t testing.TB, account, alias string, u *dovecot.User, c corpus) {
	t.Helper()
	validity := int64(u.UIDValidity(c.folder))
	rows := b.stored(t, account, alias)
	require.Len(t, rows, len(c.uids), "stored occurrences of %s/%s", account, alias)
	for i, r := range rows {
		require.Equal(t, validity, r.uidValidity, "row %d", i)
		require.Equal(t, int64(c.uids[i]), r.uid, "row %d: each server UID exactly once, in order", i)
		require.Equal(t, "Available", r.availability, "uid %d", r.uid)
		require.Equal(t, c.sums[i][:], r.sha, "uid %d: the stored SHA-256 is the server's bytes'", r.uid)
		require.NotNil(t, r.length, "uid %d", r.uid)
		require.Equal(t, int64(c.sizes[i]), *r.length, "uid %d", r.uid)
	}
	// The occurrence identity is unique by constraint; count it anyway, so
	// a changed schema cannot make "stored once" vacuous.
	type identity struct{ uidValidity, uid int64 }
	times := map[identity]int{}
	for _, r := range rows {
		times[identity{r.uidValidity, r.uid}]++
	}
	dups := 0
	for _, n := range times {
		if n > 1 {
			dups++
		}
	}
	require.Zero(t, dups, "occurrences stored more than once")
}

// requireUnseen asserts that no message of folder has \Seen on the server:
// one read-only UID SEARCH SEEN over a session of the test's own, plus the
// flags of the first and last message read through the harness.
func requireUnseen(t testing.TB, u *dovecot.User, folder string, c corpus) {
	t.Helper()
	client := u.Dial()
	_, err := client.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait()
	require.NoError(t, err)
	data, err := client.UIDSearch(&imap.SearchCriteria{Flag: []imap.Flag{imap.FlagSeen}}, nil).Wait()
	require.NoError(t, err)
	require.Empty(t, data.AllUIDs(), "messages of %s marked read on the server", folder)
	require.NoError(t, client.Unselect().Wait())
	for _, uid := range []imap.UID{c.uids[0], c.uids[len(c.uids)-1]} {
		require.NotContains(t, u.Flags(folder, uid), imap.FlagSeen, "uid %d of %s was marked read", uid, folder)
	}
}

// requireServerBytes checks, for message i of the corpus, that the server
// serves exactly the bytes whose digest the corpus kept.
func requireServerBytes(t testing.TB, u *dovecot.User, c corpus, i int) {
	t.Helper()
	msg := u.Message(c.folder, c.uids[i])
	require.Len(t, msg.BodySection, 1)
	require.Equal(t, c.sums[i], sha256.Sum256(msg.BodySection[0].Bytes), "uid %d: the server serves the seeded bytes", c.uids[i])
}
