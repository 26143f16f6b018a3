// Package mailgen generates synthetic RFC 5322 messages for tests and
// benchmarks, deterministic for a seed, with CRLF line endings.
//
// Realistic generates a mailbox's mix of kinds (alternative and plain
// text, newsletters, attachments, signed and encrypted mail, invitations,
// forwards, bounces) in several charsets, with the size tail in
// attachments: the corpus performance is measured on. Message generates
// plain prose up to 64 KB per message and one attachment above that: the
// worst case for text extraction and indexing, and the simple corpus most
// tests use.
package mailgen

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Message returns message n of a corpus with the given seed, about size
// bytes long (never shorter than its headers).
func Message(seed uint64, n int, size int) []byte {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	var b bytes.Buffer
	date := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Hour)
	fmt.Fprintf(&b, "From: Sender %d <sender%d@example.test>\r\n", n%37, n%37)
	fmt.Fprintf(&b, "To: Recipient <recipient@example.test>\r\n")
	fmt.Fprintf(&b, "Subject: Synthetic message %d\r\n", n)
	fmt.Fprintf(&b, "Message-ID: <msg-%d-%d@example.test>\r\n", seed, n)
	fmt.Fprintf(&b, "Date: %s\r\n", date.Format(time.RFC1123Z))
	b.WriteString("MIME-Version: 1.0\r\n")

	const textLimit = 64 << 10
	if size <= textLimit {
		b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
		writeText(&b, rng, size-b.Len())
		return b.Bytes()
	}
	boundary := fmt.Sprintf("b%d", n)
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=%q\r\n\r\n", boundary)
	fmt.Fprintf(&b, "--%s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", boundary)
	writeText(&b, rng, 2000)
	fmt.Fprintf(&b, "\r\n--%s\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"file-%d.bin\"\r\n\r\n", boundary, n)
	raw := make([]byte, max(0, (size-b.Len()-64)*3/4))
	for i := range raw {
		raw[i] = byte(rng.UintN(256))
	}
	enc := base64.StdEncoding.EncodeToString(raw)
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteString("\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc)
	fmt.Fprintf(&b, "\r\n--%s--\r\n", boundary)
	return b.Bytes()
}

var words = strings.Fields("the quick brown fox jumps over lazy dog mail server folder message archive invoice meeting report project budget review thanks regards")

func writeText(b *bytes.Buffer, rng *rand.Rand, n int) {
	line := 0
	for written := 0; written < n; {
		w := words[rng.IntN(len(words))]
		b.WriteString(w)
		written += len(w) + 1
		line += len(w) + 1
		if line > 70 {
			b.WriteString("\r\n")
			written++
			line = 0
		} else {
			b.WriteByte(' ')
		}
	}
	b.WriteString("\r\n")
}

// Size draws a message size from a mix like a real mailbox: median about
// 10 KB, a tail of attachments up to about 1.2 MB (p99 around 1 MB).
func Size(rng *rand.Rand) int {
	switch p := rng.Float64(); {
	case p < 0.55:
		return 2_000 + rng.IntN(12_000)
	case p < 0.85:
		return 14_000 + rng.IntN(40_000)
	case p < 0.97:
		return 60_000 + rng.IntN(300_000)
	default:
		return 400_000 + rng.IntN(800_000)
	}
}

// ReferenceSize draws a message size shaped like a measured real mailbox
// (5 000 messages, 351 MB: mean ≈ 70 KB, median ≈ 10.6 KB, p99 ≈ 1.15 MB),
// the corpus the first-synchronization benchmarks use.
// Size has a similar shape but a mean of ≈ 64 KB, a median of ≈ 13 KB and a
// p99 of ≈ 0.93 MB.
func ReferenceSize(rng *rand.Rand) int {
	switch p := rng.Float64(); {
	case p < 0.52:
		return 2_000 + rng.IntN(9_000)
	case p < 0.83:
		return 11_000 + rng.IntN(49_000)
	case p < 0.95:
		return 60_000 + rng.IntN(140_000)
	case p < 0.99:
		return 250_000 + rng.IntN(900_000)
	default:
		return 1_150_000 + rng.IntN(250_000)
	}
}
