package mailstore_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/schema"
)

// durableDirEnv names a directory under which BenchmarkUpsertOccurrence
// also runs against a durable cluster (fsync and synchronous_commit on),
// which is what makes the cost of a commit visible. The test cluster is not
// durable and usually lives in /dev/shm.
const durableDirEnv = "MAILFATHOM_BENCH_DURABLE_DIR"

// BenchmarkUpsertOccurrence measures the forward pass's write path for a
// realistic size mix, one message per operation, in three grouping
// policies: one transaction per message, one per 50 messages, and one per
// ~8 MB of MIME. Like the forward pass it holds one payload at a time and
// executes each statement at once inside the open transaction.
//
// It reports msgs/s and MB/s (MIME bytes). With MAILFATHOM_BENCH_DURABLE_DIR
// set it repeats on a durable cluster created there.
func BenchmarkUpsertOccurrence(b *testing.B) {
	corpus := newCorpus(512)
	b.Logf("corpus: %s", corpus.describe())

	targets := []struct {
		name string
		pool func(b *testing.B) *pgxpool.Pool
	}{{"Ephemeral", func(b *testing.B) *pgxpool.Pool { return dbtest.Pool(b) }}}
	if dir := os.Getenv(durableDirEnv); dir != "" {
		targets = append(targets, struct {
			name string
			pool func(b *testing.B) *pgxpool.Pool
		}{"Durable", durablePool(dir)})
	}

	policies := []struct {
		name     string
		messages int   // commit after this many messages; 0: no limit
		bytes    int64 // commit after this many bytes; 0: no limit
	}{
		{"CommitPerMessage", 1, 0},
		{"TxPer50Messages", 50, 0},
		{"TxPer8MB", 0, 8 << 20},
	}

	for _, target := range targets {
		b.Run(target.name, func(b *testing.B) {
			pool := target.pool(b)
			ctx := context.Background()
			accountID, err := mailstore.EnsureAccount(ctx, pool, "bench")
			if err != nil {
				b.Fatal(err)
			}
			run := 0
			for _, policy := range policies {
				b.Run(policy.name, func(b *testing.B) {
					// A binding per invocation, so every invocation stores
					// new occurrences rather than overwriting.
					run++
					tx, err := pool.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					folder, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, fmt.Sprintf("BENCH%d", run), fmt.Sprintf("Bench %d", run), "/")
					if err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(ctx); err != nil {
						b.Fatal(err)
					}

					var (
						tx2                 pgx.Tx
						inTx                int
						txBytes, totalBytes int64
						uid                 uint32
					)
					commit := func() {
						if tx2 == nil {
							return
						}
						if err := tx2.Commit(ctx); err != nil {
							b.Fatal(err)
						}
						tx2, inTx, txBytes = nil, 0, 0
					}
					for b.Loop() {
						m := corpus.messages[int(uid)%len(corpus.messages)]
						uid++
						if tx2 == nil {
							if tx2, err = pool.Begin(ctx); err != nil {
								b.Fatal(err)
							}
						}
						_, err := mailstore.UpsertOccurrence(ctx, tx2, mailstore.Occurrence{
							AccountID: accountID, FolderID: folder.ID, UIDValidity: 1, UID: uid,
							Size: int64(len(m.raw)), InternalDate: m.date, Flags: []string{`\Seen`},
							Subject: m.subject, MessageID: m.messageID, SentAt: m.date,
							Availability: mailstore.Available, Raw: m.raw,
						})
						if err != nil {
							b.Fatal(err)
						}
						inTx++
						txBytes += int64(len(m.raw))
						totalBytes += int64(len(m.raw))
						if (policy.messages > 0 && inTx >= policy.messages) || (policy.bytes > 0 && txBytes >= policy.bytes) {
							commit()
						}
					}
					commit()
					elapsed := b.Elapsed().Seconds()
					b.ReportMetric(float64(b.N)/elapsed, "msgs/s")
					b.ReportMetric(float64(totalBytes)/1e6/elapsed, "MB/s")
				})
			}
		})
	}
}

// durablePool starts a durable cluster under dir, migrates it, and returns
// a pool on it; both are closed when the benchmark ends.
func durablePool(dir string) func(b *testing.B) *pgxpool.Pool {
	return func(b *testing.B) *pgxpool.Pool {
		ctx := context.Background()
		parent, err := os.MkdirTemp(dir, "mailstore-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(parent) })
		// The server runs as postgres when the benchmark runs as root.
		if err := os.Chmod(parent, 0o755); err != nil {
			b.Fatal(err)
		}
		cl, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(parent, "data"), Durable: true, Logf: b.Logf})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cl.Stop(context.Background()) })
		pool, err := pgxpool.New(ctx, cl.ConnString("postgres"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		if _, err := schema.Migrate(ctx, pool, nil); err != nil {
			b.Fatal(err)
		}
		return pool
	}
}

type benchMessage struct {
	raw                []byte
	subject, messageID string
	date               time.Time
}

type corpus struct{ messages []benchMessage }

// newCorpus builds n messages with a mailbox-like size mix (overall median
// about 10 KB, mean about 60 KB): about 70% text
// messages around 7.5 KB (log-normal, 1–64 KB), 22% 30–100 KB and 8%
// 100 KB–1 MB (log-uniform), the larger ones carrying a base64 attachment
// of random bytes, which compresses as poorly as real attachments do.
func newCorpus(n int) corpus {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so no said what up its about into than them can only other time new some could these two may first then do any like my now over such our man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three")
	sizeOf := func() int {
		switch p := rng.Float64(); {
		case p < 0.70:
			s := math.Exp(math.Log(7_500) + 0.6*rng.NormFloat64())
			return int(min(max(s, 1_000), 64_000))
		case p < 0.92:
			return 30_000 + rng.IntN(70_000)
		default:
			return int(math.Exp(math.Log(100_000) + rng.Float64()*math.Log(10)))
		}
	}
	c := corpus{messages: make([]benchMessage, n)}
	for i := range c.messages {
		size := sizeOf()
		date := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour)
		subject := fmt.Sprintf("Quarterly %s report %d", words[rng.IntN(len(words))], i)
		messageID := fmt.Sprintf("<bench-%d@example.org>", i)
		var sb strings.Builder
		fmt.Fprintf(&sb, "From: Alice <alice@example.org>\r\nTo: Bob <bob@example.org>\r\nSubject: %s\r\nMessage-ID: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\n",
			subject, messageID, date.Format(time.RFC1123Z))
		textSize := size
		if size > 30_000 {
			textSize = 4_000 + rng.IntN(8_000)
			sb.WriteString("Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
		} else {
			sb.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
		}
		for line := 0; sb.Len() < textSize; line++ {
			for range 12 {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			sb.WriteString("\r\n")
		}
		if size > 30_000 {
			sb.WriteString("--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n")
			attachment := make([]byte, max(size-sb.Len()-16, 0)*3/4)
			for i := range attachment {
				attachment[i] = byte(rng.Uint32())
			}
			enc := base64.StdEncoding.EncodeToString(attachment)
			for len(enc) > 76 {
				sb.WriteString(enc[:76])
				sb.WriteString("\r\n")
				enc = enc[76:]
			}
			sb.WriteString(enc)
			sb.WriteString("\r\n--b--\r\n")
		}
		c.messages[i] = benchMessage{raw: []byte(sb.String()), subject: subject, messageID: messageID, date: date}
	}
	return c
}

func (c corpus) describe() string {
	sizes := make([]int, len(c.messages))
	total := 0
	for i, m := range c.messages {
		sizes[i] = len(m.raw)
		total += len(m.raw)
	}
	slices.Sort(sizes)
	over100k := 0
	for _, s := range sizes {
		if s >= 100_000 {
			over100k++
		}
	}
	return fmt.Sprintf("%d messages, median %d B, mean %d B, p90 %d B, max %d B, %d%% at least 100 KB",
		len(sizes), sizes[len(sizes)/2], total/len(sizes), sizes[len(sizes)*9/10], sizes[len(sizes)-1], over100k*100/len(sizes))
}
