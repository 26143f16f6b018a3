// Package vectortest generates synthetic embeddings clustered the way a
// mailbox's are, and stores them as a mailbox's passages and vectors, for
// the vector search's tests and benchmarks. Everything is deterministic for
// a seed.
//
// A set has topics: random unit centres, or — with groups — centres drawn
// around random group centres, so that a group's topics overlap (a
// topic's centre has a cosine of about 0.5 with its group's other
// topics'). A passage is a random topic's centre plus noise of equal norm
// (a cosine of about 0.7 with its centre), and a query is a fresh passage
// of a random topic, so a query's true neighbours are a topic's passages —
// and, with groups, its sibling topics' — among many near-orthogonal
// others.
package vectortest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
)

// Generator draws passages and queries of one set.
type Generator struct {
	rng     *rand.Rand
	dims    int
	centres [][]float32
}

// NewGenerator returns the set of topics topics in dims dimensions drawn by
// seed; groups > 0 draws them around that many group centres.
func NewGenerator(topics, groups, dims int, seed uint64) *Generator {
	g := &Generator{rng: rand.New(rand.NewPCG(seed, uint64(topics)<<20|uint64(groups))), dims: dims}
	var around [][]float32
	for range groups {
		around = append(around, Noisy(g.rng, nil, dims, 1))
	}
	for range topics {
		var centre []float32
		if len(around) > 0 {
			centre = around[g.rng.IntN(len(around))]
		}
		g.centres = append(g.centres, Noisy(g.rng, centre, dims, 1))
	}
	return g
}

// Passage returns a passage of a random topic.
func (g *Generator) Passage() []float32 {
	return Noisy(g.rng, g.centres[g.rng.IntN(len(g.centres))], g.dims, 1)
}

// Query returns a query: a fresh passage of a random topic.
func (g *Generator) Query() []float32 { return g.Passage() }

// Noisy returns centre plus Gaussian noise of norm about scale, unit
// length; a nil centre gives a random unit vector.
func Noisy(rng *rand.Rand, centre []float32, dims int, scale float64) []float32 {
	v := make([]float64, dims)
	sigma := scale / math.Sqrt(float64(dims))
	if centre == nil {
		sigma = 1
	}
	var norm float64
	for i := range v {
		v[i] = rng.NormFloat64() * sigma
		if centre != nil {
			v[i] += float64(centre[i])
		}
		norm += v[i] * v[i]
	}
	out := make([]float32, dims)
	for i := range v {
		out[i] = float32(v[i] / math.Sqrt(norm))
	}
	return out
}

// Folder is one folder alias of a layout and the share of the messages in
// it.
type Folder struct {
	Account, Alias string
	Share          float64
}

// Layout is the mailbox Seed stores.
type Layout struct {
	// Emails messages of PerEmail passages each.
	Emails, PerEmail int
	// Folders the messages are spread over by share (their shares summing
	// to 1). Default: all in primary's INBOX.
	Folders []Folder
	// First is the first message's sending date; each later one is sent
	// Step after it. Default 2020-01-01 and one minute.
	First time.Time
	Step  time.Duration
	// Model names the profile. Default "synthetic".
	Model string
	// Seed draws the messages' folders and ids.
	Seed uint64
}

// Email is one stored message.
type Email struct {
	ID      uuid.UUID
	Account string
	Alias   string
	SentAt  time.Time
}

// Seeded is what Seed stored: the profile, the messages in order, and
// each message's passages' vectors (Vectors[i*PerEmail+o] is message i's
// passage o).
type Seeded struct {
	Profile  int16
	PerEmail int
	Emails   []Email
	Vectors  [][]float32
}

// Seed stores layout's messages and their passages, and gives every
// passage a vector from next under one profile of next's dimensions — as
// an embed job would before the vector index exists: each pending, with
// its signature, code and copies of its message's folder and date. It
// writes with COPY (a million passages in a few minutes), then vacuums and
// analyzes what it wrote.
func Seed(tb testing.TB, ctx context.Context, pool *pgxpool.Pool, layout Layout, next func() []float32) Seeded {
	tb.Helper()
	if layout.Folders == nil {
		layout.Folders = []Folder{{Account: "primary", Alias: "INBOX", Share: 1}}
	}
	if layout.First.IsZero() {
		layout.First = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if layout.Step == 0 {
		layout.Step = time.Minute
	}
	if layout.Model == "" {
		layout.Model = "synthetic"
	}
	fail := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatalf("vectortest: %v", err)
		}
	}
	type binding struct{ account, folder int64 }
	bindings := make([]binding, len(layout.Folders))
	tx, err := pool.Begin(ctx)
	fail(err)
	for i, f := range layout.Folders {
		accountID, err := mailstore.EnsureAccount(ctx, tx, f.Account)
		fail(err)
		b, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, f.Alias, f.Alias, "/")
		fail(err)
		bindings[i] = binding{accountID, b.ID}
	}
	fail(tx.Commit(ctx))

	rng := rand.New(rand.NewPCG(layout.Seed, uint64(layout.Emails)))
	s := Seeded{PerEmail: layout.PerEmail, Emails: make([]Email, layout.Emails)}
	folderOf := make([]int, layout.Emails)
	uids := make([]uint32, len(layout.Folders))
	for i := range s.Emails {
		x, f := rng.Float64(), 0
		for f < len(layout.Folders)-1 && x >= layout.Folders[f].Share {
			x -= layout.Folders[f].Share
			f++
		}
		var id uuid.UUID
		binary.BigEndian.PutUint64(id[:8], rng.Uint64())
		binary.BigEndian.PutUint64(id[8:], rng.Uint64())
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		folderOf[i] = f
		s.Emails[i] = Email{ID: id, Account: layout.Folders[f].Account, Alias: layout.Folders[f].Alias,
			SentAt: layout.First.Add(time.Duration(i) * layout.Step)}
	}
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"stored_emails"},
		[]string{"id", "mailbox_account_id", "mail_folder_id", "uid_validity", "uid", "content_availability", "rfc822_size", "subject", "sent_at"},
		pgx.CopyFromSlice(len(s.Emails), func(i int) ([]any, error) {
			f := folderOf[i]
			uids[f]++
			return []any{s.Emails[i].ID, bindings[f].account, bindings[f].folder, int64(1), int64(uids[f]),
				"ExceededSizeLimit", int64(1 << 30), fmt.Sprintf("message %d", i), s.Emails[i].SentAt}, nil
		}))
	fail(err)
	_, err = pool.Exec(ctx, `
		INSERT INTO email_passages (stored_email_id, ordinal, text)
		SELECT e.id, g, 'passage ' || g FROM stored_emails e, generate_series(0, $1 - 1) AS g`, layout.PerEmail)
	fail(err)
	s.Profile, err = searchindex.EnsureProfile(ctx, pool, layout.Model, len(next()))
	fail(err)

	total := layout.Emails * layout.PerEmail
	s.Vectors = make([][]float32, total)
	for i := range s.Vectors {
		s.Vectors[i] = next()
	}
	row := func(i int) (uuid.UUID, int16) { return s.Emails[i/layout.PerEmail].ID, int16(i % layout.PerEmail) }
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"passage_vectors"}, []string{"stored_email_id", "ordinal", "profile_id", "vector"},
		pgx.CopyFromSlice(total, func(i int) ([]any, error) {
			id, o := row(i)
			return []any{id, o, s.Profile, searchindex.EncodeVector(s.Vectors[i])}, nil
		}))
	fail(err)
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"passage_signatures"},
		[]string{"stored_email_id", "ordinal", "profile_id", "signature", "code", "mail_folder_id", "sent_at"},
		pgx.CopyFromSlice(total, func(i int) ([]any, error) {
			id, o := row(i)
			e := s.Emails[i/layout.PerEmail]
			return []any{id, o, s.Profile, searchindex.Signature(s.Vectors[i]), searchindex.EncodeCode(s.Vectors[i]),
				bindings[folderOf[i/layout.PerEmail]].folder, e.SentAt}, nil
		}))
	fail(err)
	// Every passage has its vector: nothing is owed.
	_, err = pool.Exec(ctx, `DELETE FROM vector_backlog WHERE profile_id = $1`, s.Profile)
	fail(err)
	fail(vacuum(ctx, pool, "stored_emails, email_passages, passage_vectors, passage_signatures, vector_backlog"))
	return s
}

// vacuum vacuums and analyzes tables once every commit before it is
// durable: a test cluster commits asynchronously (synchronous_commit off),
// and VACUUM leaves a page a row committed so was written to not
// all-visible until the commit's WAL is flushed — index-only scans would
// then visit it. One synchronous commit flushes all that came before.
func vacuum(ctx context.Context, pool *pgxpool.Pool, tables string) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on; SELECT txid_current()`)
		return err
	})
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `VACUUM ANALYZE `+tables)
	return err
}

// Build builds the profile's vector index as the vector_index jobs do,
// one transaction a step, without River: it trains the next generation,
// assigns every passage to it in batches of batch, and makes it serve. It
// returns the generation's number.
func Build(tb testing.TB, ctx context.Context, pool *pgxpool.Pool, ix *searchindex.VectorIndex, profile int16, batch int) int16 {
	tb.Helper()
	status, err := searchindex.ReadIndexStatus(ctx, pool, profile)
	if err != nil {
		tb.Fatalf("vectortest: %v", err)
	}
	trained, err := searchindex.TrainGeneration(ctx, pool, status)
	if err != nil {
		tb.Fatalf("vectortest: %v", err)
	}
	var number int16
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		number, err = searchindex.BeginGeneration(ctx, tx, trained)
		return err
	})
	if err != nil {
		tb.Fatalf("vectortest: %v", err)
	}
	Assign(tb, ctx, pool, ix, profile, number, batch)
	return number
}

// Assign moves every passage outside generation number's lists into them
// in batches of batch and finishes the generation.
func Assign(tb testing.TB, ctx context.Context, pool *pgxpool.Pool, ix *searchindex.VectorIndex, profile, number int16, batch int) {
	tb.Helper()
	for done := false; !done; {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			n, err := ix.AssignBatch(ctx, tx, profile, number, batch)
			if err != nil || n == batch {
				return err
			}
			done, err = searchindex.FinishGeneration(ctx, tx, profile, number)
			return err
		})
		if err != nil {
			tb.Fatalf("vectortest: %v", err)
		}
	}
	if err := vacuum(ctx, pool, "passage_signatures"); err != nil {
		tb.Fatalf("vectortest: %v", err)
	}
}
