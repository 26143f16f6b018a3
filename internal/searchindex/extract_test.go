package searchindex_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/mimex"
)

func TestRecord(t *testing.T) {
	t.Parallel()
	raw := mailgen.Message(1, 7, 200_000) // multipart with a base64 attachment
	rec := searchindex.Extract(uuid.New(), raw, mimex.DefaultLimits())
	require.True(t, rec.Readable)
	require.Equal(t, "Synthetic message 7", rec.Subject)
	require.Equal(t, searchindex.SourcePlainText, rec.TextSource)
	require.Equal(t, 1, rec.AttachmentCount)
	require.Len(t, rec.Attachments, 1)
	require.Equal(t, "file-7.bin", rec.Attachments[0].FileName)
	require.NotEmpty(t, rec.Text)
	require.NotNil(t, rec.SentAt)
	require.Equal(t, time.UTC, rec.SentAt.Location())

	bad := searchindex.Extract(uuid.New(), []byte("Content-Type: multipart/mixed\r\n\r\nno boundary\r\n"), mimex.DefaultLimits())
	require.False(t, bad.Readable)
	require.Equal(t, string(mimex.Unparseable), bad.Failure)
}

// BenchmarkExtractCorpus measures extraction over the generated corpus the
// synchronization benchmark uses (median ≈ 10 KB, a tail of attachments up
// to ≈ 1.2 MB).
func BenchmarkExtractCorpus(b *testing.B) {
	rng := rand.New(rand.NewPCG(42, 42))
	corpus := make([][]byte, 500)
	var total int64
	for i := range corpus {
		corpus[i] = mailgen.Message(42, i, mailgen.Size(rng))
		total += int64(len(corpus[i]))
	}
	lim := mimex.DefaultLimits()
	id := uuid.New()
	b.ResetTimer()
	start := time.Now()
	n := 0
	for b.Loop() {
		searchindex.Extract(id, corpus[n%len(corpus)], lim)
		n++
	}
	elapsed := time.Since(start).Seconds()
	b.ReportMetric(float64(n)/elapsed, "msgs/s")
	b.ReportMetric(float64(total)/float64(len(corpus))*float64(n)/elapsed/1e6, "MB/s")
}
