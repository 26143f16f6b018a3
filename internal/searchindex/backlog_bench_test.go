package searchindex_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/vectortest"
)

// scanAwaitingSQL counts what awaits by reading every passage, as the
// counts did before the backlog was kept: the comparison the benchmark
// reports beside the backlog's count.
const scanAwaitingSQL = `
	SELECT count(DISTINCT p.stored_email_id)
	FROM email_passages p JOIN served_stored_emails e ON e.id = p.stored_email_id
	WHERE NOT EXISTS (SELECT 1 FROM passage_vectors v
	                  WHERE v.stored_email_id = p.stored_email_id AND v.ordinal = p.ordinal AND v.profile_id = $1)`

// BenchmarkAwaitingCount measures what one scrape's count of the messages
// awaiting vectors costs on a mailbox of 100 000 passages, every one
// embedded but awaiting ones: read from the backlog (what the gauge and
// the status view do) and, for comparison, from the passages.
func BenchmarkAwaitingCount(b *testing.B) {
	const emails, perEmail, dims = 10_000, 10, 64
	for _, owed := range []int{0, 1000} {
		b.Run(fmt.Sprintf("awaiting=%d", owed), func(b *testing.B) {
			ctx := context.Background()
			pool := dbtest.Pool(b)
			gen := vectortest.NewGenerator(100, 0, dims, 1)
			seeded := vectortest.Seed(b, ctx, pool, vectortest.Layout{Emails: emails, PerEmail: perEmail, Seed: 1}, gen.Passage)
			if owed > 0 {
				ids := make([]any, 0, owed)
				for _, e := range seeded.Emails[:owed] {
					ids = append(ids, e.ID)
				}
				if _, err := pool.Exec(ctx, `DELETE FROM passage_vectors WHERE profile_id = $1 AND ordinal = 0 AND stored_email_id = ANY($2)`,
					seeded.Profile, ids); err != nil {
					b.Fatal(err)
				}
				if _, err := pool.Exec(ctx, `INSERT INTO vector_backlog (profile_id, stored_email_id) SELECT $1, unnest($2::uuid[])`,
					seeded.Profile, ids); err != nil {
					b.Fatal(err)
				}
				if _, err := pool.Exec(ctx, `VACUUM ANALYZE passage_vectors, vector_backlog`); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("from=backlog", func(b *testing.B) {
				for b.Loop() {
					backlog, err := searchindex.AwaitingPerProfile(ctx, pool)
					if err != nil || len(backlog) != 1 || backlog[0].Awaiting != int64(owed) {
						b.Fatalf("%v %v", backlog, err)
					}
				}
			})
			b.Run("from=passages", func(b *testing.B) {
				for b.Loop() {
					var n int64
					if err := pool.QueryRow(ctx, scanAwaitingSQL, seeded.Profile).Scan(&n); err != nil || n != int64(owed) {
						b.Fatalf("%d %v", n, err)
					}
				}
			})
		})
	}
}
