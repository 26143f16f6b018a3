package wire

import (
	"bytes"
	stdflate "compress/flate"
	"fmt"
	"io"
	"testing"

	kflate "github.com/klauspost/compress/flate"

	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
)

// deflatedCorpus is n realistic messages as a server sends them under
// COMPRESS=DEFLATE: each as a FETCH response, deflated at zlib's default
// level (what Dovecot's imap_zlib uses) and sync-flushed after each
// response. It returns the deflated stream and the inflated length.
func deflatedCorpus(b *testing.B, n int) ([]byte, int64) {
	b.Helper()
	var out bytes.Buffer
	w, err := stdflate.NewWriter(&out, stdflate.DefaultCompression)
	if err != nil {
		b.Fatal(err)
	}
	var plain int64
	for i := range n {
		raw := mailgen.Realistic(42, i)
		resp := fmt.Appendf(nil, "* %d FETCH (UID %d BODY[] {%d}\r\n", i+1, i+1, len(raw))
		resp = append(append(resp, raw...), ")\r\n"...)
		plain += int64(len(resp))
		if _, err := w.Write(resp); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	return out.Bytes(), plain
}

// BenchmarkInflate measures what the client spends inflating a compressed
// content connection, per realistic message, with the standard library's
// inflater and with github.com/klauspost/compress's, which
// newDeflateConn uses:
//
//	go test -run '^$' -bench Inflate ./imapx/internal/wire
func BenchmarkInflate(b *testing.B) {
	const n = 500
	stream, plain := deflatedCorpus(b, n)
	b.Logf("%d messages, %d bytes inflated, %d deflated (%.0f %%)", n, plain, len(stream), 100*float64(len(stream))/float64(plain))
	for _, impl := range []struct {
		name string
		open func(io.Reader) io.ReadCloser
	}{
		{"stdlib", stdflate.NewReader},
		{"klauspost", kflate.NewReader},
	} {
		b.Run(impl.name, func(b *testing.B) {
			buf := make([]byte, 32<<10)
			b.SetBytes(plain)
			for b.Loop() {
				r := impl.open(bytes.NewReader(stream))
				var got int64
				for {
					k, err := r.Read(buf)
					got += int64(k)
					if err == io.EOF || (err != nil && got == plain) {
						break
					}
					if err != nil {
						if got == plain {
							break
						}
						b.Fatal(err)
					}
					if got == plain {
						break
					}
				}
				if got != plain {
					b.Fatalf("inflated %d bytes, want %d", got, plain)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/msg")
		})
	}
}
