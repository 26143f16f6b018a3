package imapx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// maxSearchResults bounds how many UIDs one search may return. A folder
// holds at most that many messages in any server seen so far; an answer
// above it is refused before it is expanded into memory.
const maxSearchResults = 10_000_000

// SearchUIDs returns the UIDs above after in the open folder, ascending, in
// one UID SEARCH UID <after+1>:* (RETURN (ALL) when the server supports
// ESEARCH). When since is not zero, SINCE <date> is added, which the server
// compares with each message's INTERNALDATE (its arrival), by calendar date
// only: the date of since in its own location is used.
//
// "n:*" also matches the highest UID when it is below n; such a UID is left
// out, so an up-to-date folder yields an empty result.
func (s *ReadSession) SearchUIDs(ctx context.Context, after uint32, since time.Time) ([]uint32, error) {
	if err := s.openFolder(); err != nil {
		return nil, err
	}
	if after == math.MaxUint32 {
		return nil, nil
	}
	start := time.Now()
	criteria := &imap.SearchCriteria{UID: []imap.UIDSet{{{Start: imap.UID(after + 1), Stop: 0}}}}
	if !since.IsZero() {
		criteria.Since = since
	}
	var data *imap.SearchData
	err := s.run(ctx, "UID SEARCH", func(c *imapclient.Client, _ *wire.Watchdog) error {
		var err error
		data, err = c.UIDSearch(criteria, s.searchOptions()).Wait()
		return err
	})
	if err != nil {
		return nil, err
	}
	uids, err := expandUIDs(data.All, after)
	if err != nil {
		return nil, err
	}
	s.debug(ctx, "imap search", slog.Int("uids", len(uids)), slog.Bool("since", !since.IsZero()),
		slog.Duration("elapsed", time.Since(start)))
	return uids, nil
}

// expandUIDs turns a search result into sorted, distinct UIDs above after,
// refusing "*" and implausibly large answers before allocating for them.
func expandUIDs(all imap.NumSet, after uint32) ([]uint32, error) {
	if all == nil {
		return nil, nil
	}
	set, ok := all.(imap.UIDSet)
	if !ok {
		return nil, fmt.Errorf("imapx: UID SEARCH answered with sequence numbers: %w", ErrProtocolViolation)
	}
	total := uint64(0)
	for _, r := range set {
		if r.Start == 0 || r.Stop == 0 {
			return nil, fmt.Errorf("imapx: UID SEARCH answered with a dynamic or zero UID: %w", ErrProtocolViolation)
		}
		lo, hi := min(r.Start, r.Stop), max(r.Start, r.Stop)
		total += uint64(hi-lo) + 1
	}
	if total > maxSearchResults {
		return nil, fmt.Errorf("imapx: UID SEARCH answered with %d UIDs: %w", total, ErrProtocolViolation)
	}
	uids := make([]uint32, 0, total)
	for _, r := range set {
		lo, hi := uint32(min(r.Start, r.Stop)), uint32(max(r.Start, r.Stop))
		for uid := lo; ; uid++ {
			if uid > after {
				uids = append(uids, uid)
			}
			if uid == hi {
				break
			}
		}
	}
	slices.Sort(uids)
	return slices.Compact(uids), nil
}

// MessageMetadata is what FetchMetadata reports for one message.
type MessageMetadata struct {
	UID  uint32
	Size int64 // RFC822.SIZE
	// InternalDate is the server's arrival time, in UTC.
	InternalDate time.Time
	// Flags are the message's flags, e.g. `\Seen`, `$Forwarded`; the
	// per-session \Recent is left out.
	Flags []string
	// Subject is the envelope subject with RFC 2047 words decoded.
	Subject string
	// MessageID is the envelope Message-ID without angle brackets, "" when
	// absent or unparsable.
	MessageID string
	// SentAt is the envelope Date in UTC, zero when absent or unparsable.
	SentAt time.Time
}

// FetchMetadata fetches UID, FLAGS, INTERNALDATE, RFC822.SIZE and ENVELOPE of
// uids from the open folder in one UID FETCH. It returns one entry per
// message the server answered for, in the server's order; a UID expunged
// meanwhile is simply absent. (When the server reports expunges during the
// FETCH, or answers with an expunged-message placeholder, one UID SEARCH
// checks which UIDs still exist.) Callers bound len(uids) (the command line
// grows with it).
func (s *ReadSession) FetchMetadata(ctx context.Context, uids []uint32) ([]MessageMetadata, error) {
	if err := s.openFolder(); err != nil {
		return nil, err
	}
	if len(uids) == 0 {
		return nil, nil
	}
	start := time.Now()
	var a metadataAnswer
	expungesBefore := s.expungeCount()
	err := s.run(ctx, "UID FETCH", func(c *imapclient.Client, w *wire.Watchdog) error {
		var err error
		a, err = collectMetadata(c.Fetch(uidSet(uids), metadataOptions), w.Resume, len(uids))
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.settleMetadata(ctx, a, expungesBefore, len(uids), start)
}

// metadataOptions are the items FetchMetadata asks for.
var metadataOptions = &imap.FetchOptions{UID: true, Flags: true, InternalDate: true, RFC822Size: true, Envelope: true}

// metadataAnswer is what the answers to one metadata FETCH said.
type metadataAnswer struct {
	out []MessageMetadata
	// incomplete are the UIDs whose only answer was a FETCH reporting
	// their flags alone.
	incomplete []uint32
	// suspicious reports an answer that looks like an expunged message's
	// placeholder.
	suspicious bool
}

// collectMetadata reads the answers to cmd, a UID FETCH of
// metadataOptions for n UIDs, calling progress after each, and consumes
// the command. A server may send a UID's new flags alone, unsolicited,
// while the command is pending; go-imap hands that FETCH to the command
// whose set holds the UID and then no other FETCH of the UID, so its
// real answer never arrives: such a UID is incomplete, not answered.
func collectMetadata(cmd *imapclient.FetchCommand, progress func(), n int) (metadataAnswer, error) {
	defer cmd.Close()
	a := metadataAnswer{out: make([]MessageMetadata, 0, n)}
	for {
		msg := cmd.Next()
		if msg == nil {
			break
		}
		buf, err := msg.Collect()
		if err != nil {
			return metadataAnswer{}, err
		}
		progress()
		switch {
		case buf.UID == 0:
		case buf.Envelope == nil && buf.InternalDate.IsZero() && buf.RFC822Size == 0:
			a.incomplete = append(a.incomplete, uint32(buf.UID))
		default:
			a.suspicious = a.suspicious || looksExpunged(buf)
			a.out = append(a.out, metadataOf(buf))
		}
	}
	return a, cmd.Close()
}

// settleMetadata finishes a metadata FETCH of requested UIDs sent at start
// that answered a: the incomplete UIDs are asked for once more, in a FETCH
// of their own (one still incomplete then is left out, as if expunged);
// and when messages were expunged since expungesBefore or an answer looked
// like a placeholder, one UID SEARCH drops the UIDs that no longer exist.
func (s *ReadSession) settleMetadata(ctx context.Context, a metadataAnswer, expungesBefore int64, requested int, start time.Time) ([]MessageMetadata, error) {
	if len(a.incomplete) > 0 {
		var again metadataAnswer
		err := s.run(ctx, "UID FETCH", func(c *imapclient.Client, w *wire.Watchdog) error {
			var err error
			again, err = collectMetadata(c.Fetch(uidSet(a.incomplete), metadataOptions), w.Resume, len(a.incomplete))
			return err
		})
		if err != nil {
			return nil, err
		}
		a.out, a.suspicious = append(a.out, again.out...), a.suspicious || again.suspicious
	}
	out := a.out
	dropped := 0
	if a.suspicious || s.expungeCount() != expungesBefore {
		answered := len(out)
		var err error
		out, err = s.dropExpunged(ctx, out)
		if err != nil {
			return nil, err
		}
		dropped = answered - len(out)
	}
	s.debug(ctx, "imap fetch metadata", slog.Int("requested", requested), slog.Int("answered", len(out)),
		slog.Int("expunged", dropped), slog.Int("asked_again", len(a.incomplete)), slog.Duration("elapsed", time.Since(start)))
	return out, nil
}

// looksExpunged recognizes the placeholder a server may send for a message
// another session expunged before this one was told (RFC 2180, 4.1.3):
// Dovecot answers with FLAGS (\Deleted), INTERNALDATE 1970-01-01,
// RFC822.SIZE 0 and an all-NIL envelope.
func looksExpunged(buf *imapclient.FetchMessageBuffer) bool {
	return buf.RFC822Size == 0 && (buf.InternalDate.IsZero() || buf.InternalDate.Unix() == 0)
}

// dropExpunged keeps the entries whose UIDs still exist, by one UID SEARCH
// UID <set>. FetchMetadata calls it only when messages were expunged during
// its FETCH or an answer looks like an expunged placeholder: such an answer
// carries no real metadata, and a UID expunged meanwhile is to be absent.
func (s *ReadSession) dropExpunged(ctx context.Context, ms []MessageMetadata) ([]MessageMetadata, error) {
	if len(ms) == 0 {
		return ms, nil
	}
	fetched := make([]uint32, len(ms))
	for i, m := range ms {
		fetched[i] = m.UID
	}
	var data *imap.SearchData
	err := s.run(ctx, "UID SEARCH", func(c *imapclient.Client, _ *wire.Watchdog) error {
		var err error
		data, err = c.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{uidSet(fetched)}}, s.searchOptions()).Wait()
		return err
	})
	if err != nil {
		return nil, err
	}
	present, err := expandUIDs(data.All, 0)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ms, func(m MessageMetadata) bool {
		_, found := slices.BinarySearch(present, m.UID)
		return !found
	}), nil
}

// expungeCount returns how many unsolicited EXPUNGE responses the current
// connection has seen.
func (s *ReadSession) expungeCount() int64 {
	if s.cn == nil {
		return 0
	}
	return s.cn.expunges.Load()
}

func (s *ReadSession) searchOptions() *imap.SearchOptions {
	if s.caps.Has(imap.CapESearch) {
		return &imap.SearchOptions{ReturnAll: true}
	}
	return nil
}

func metadataOf(buf *imapclient.FetchMessageBuffer) MessageMetadata {
	m := MessageMetadata{
		UID:          uint32(buf.UID),
		Size:         buf.RFC822Size,
		InternalDate: buf.InternalDate.UTC(),
		Flags:        make([]string, 0, len(buf.Flags)),
	}
	if buf.InternalDate.IsZero() {
		m.InternalDate = time.Time{}
	}
	for _, f := range buf.Flags {
		if f != flagRecent {
			m.Flags = append(m.Flags, string(f))
		}
	}
	if env := buf.Envelope; env != nil {
		m.Subject = env.Subject
		m.MessageID = env.MessageID
		if !env.Date.IsZero() {
			m.SentAt = env.Date.UTC()
		}
	}
	return m
}

// flagRecent is IMAP4rev1's per-session \Recent, which go-imap v2 has no
// constant for.
const flagRecent imap.Flag = `\Recent`

func uidSet(uids []uint32) imap.UIDSet {
	var set imap.UIDSet
	for _, u := range uids {
		set.AddNum(imap.UID(u))
	}
	return set
}

// Body is one message FetchBodies delivers.
type Body struct {
	UID uint32
	// Raw is the complete message. It is valid only during the callback
	// (the buffer is reused for the next message) and nil when Exceeded.
	Raw []byte
	// Exceeded reports that the message is larger than maxBytes; its bytes
	// were read and dropped without being kept.
	Exceeded bool
}

// FetchBodies fetches the complete raw messages of uids from the open folder
// in one UID FETCH <set> (UID BODY.PEEK[]), which never sets \Seen, and calls
// fn once per message, in the order the server sends them (not necessarily
// the order of uids), before reading the next one: at most one message is
// held at a time. A message larger than maxBytes is not buffered at all; fn
// gets it with Exceeded set; an empty message has an empty, non-nil Raw.
// UIDs the server does not answer for — expunged meanwhile, or withheld
// (no answer, or BODY[] answered with NIL) — are not delivered: the caller
// tells which by comparing what it asked for with what it got.
//
// An error from fn ends the operation: the rest of the response is read and
// dropped so the connection stays usable, and fn's error is returned as is.
// A connection failure mid-stream is a transient *TransportError; messages
// fn already received stay delivered, so a caller resumes after the last
// UID it saw (after Recover).
func (s *ReadSession) FetchBodies(ctx context.Context, uids []uint32, maxBytes int64, fn func(Body) error) error {
	if err := s.openFolder(); err != nil {
		return err
	}
	if maxBytes <= 0 {
		return errors.New("imapx: FetchBodies needs a positive maxBytes")
	}
	if len(uids) == 0 {
		return nil
	}
	start := time.Now()
	var r bodyReader
	err := s.run(ctx, "UID FETCH", func(c *imapclient.Client, w *wire.Watchdog) error {
		return r.read(c.Fetch(uidSet(uids), bodyOptions), w, maxBytes, fn)
	})
	s.debugBodies(ctx, len(uids), r, start)
	return err
}

// bodyOptions are the items FetchBodies asks for: BODY.PEEK[], which never
// sets \Seen.
var bodyOptions = &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{{Peek: true}}}

// bodyReader reads the answers of body FETCH commands and counts what
// they delivered. Its buffer is reused from one message to the next.
type bodyReader struct {
	buf       []byte
	delivered int
	exceeded  int
	total     int64
}

// read hands the answers to cmd, a UID FETCH of bodyOptions, to fn as
// FetchBodies describes, and consumes the command, except after a literal
// that failed mid-read: then the connection is killed, which ends cmd and
// every command sent after it.
func (r *bodyReader) read(cmd *imapclient.FetchCommand, w *wire.Watchdog, maxBytes int64, fn func(Body) error) error {
	killed := false
	// However this ends, the command is consumed: go-imap's reader blocks
	// on an unconsumed message. The exception is a literal that failed
	// mid-read: go-imap would read it again while its reader goroutine
	// already reads the same stream, so the connection is killed and the
	// command abandoned (its reader then ends on the closed connection
	// without waiting for anyone).
	defer func() {
		if !killed {
			_ = cmd.Close()
		}
	}()
	for {
		msg := cmd.Next()
		if msg == nil {
			break
		}
		var (
			body    Body
			hasBody bool
		)
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch item := item.(type) {
			case imapclient.FetchItemDataUID:
				body.UID = uint32(item.UID)
			case imapclient.FetchItemDataBodySection:
				if item.Literal == nil || hasBody {
					continue
				}
				var err error
				var n int64
				r.buf, n, body.Exceeded, err = readLiteral(item.Literal, r.buf, maxBytes)
				if err != nil {
					killed = true
					w.Kill()
					return err
				}
				hasBody = true
				r.total += n
				if !body.Exceeded {
					// An empty message is an empty message, not a missing
					// one: Raw is never nil when not Exceeded.
					body.Raw = r.buf
					if body.Raw == nil {
						body.Raw = []byte{}
					}
				}
			}
		}
		if !hasBody || body.UID == 0 {
			continue
		}
		if body.Exceeded {
			r.exceeded++
		}
		w.Pause()
		err := fn(body)
		w.Resume()
		if err != nil {
			if cerr := cmd.Close(); cerr != nil {
				// The drain failed: the connection is of no further use,
				// but fn's error is the one to report.
				w.Kill()
			}
			return &callerError{err: err}
		}
		r.delivered++
	}
	return cmd.Close()
}

// debugBodies logs what a body FETCH of requested UIDs sent at start
// delivered.
func (s *ReadSession) debugBodies(ctx context.Context, requested int, r bodyReader, start time.Time) {
	s.debug(ctx, "imap fetch bodies", slog.Int("requested", requested), slog.Int("delivered", r.delivered),
		slog.Int("exceeded", r.exceeded), slog.Int64("bytes", r.total), slog.Duration("elapsed", time.Since(start)))
}

// readLiteral reads one message literal. Up to maxBytes it is read into buf
// (grown as needed and returned for reuse); a larger one is read to its end
// into nothing and reported as exceeded. A literal that ends before its
// declared size is an io.ErrUnexpectedEOF. (go-imap's reader resumes once
// the literal has reported EOF, which the caller's next msg.Next triggers.)
func readLiteral(lit imap.LiteralReader, buf []byte, maxBytes int64) (_ []byte, n int64, exceeded bool, err error) {
	size := lit.Size()
	if size > maxBytes {
		n, err = io.Copy(io.Discard, lit)
		if err == nil && n < size {
			err = io.ErrUnexpectedEOF
		}
		return buf, n, true, err
	}
	if int64(cap(buf)) < size {
		buf = make([]byte, size, min(max(size, 2*int64(cap(buf))), maxBytes))
	}
	buf = buf[:size]
	m, err := io.ReadFull(lit, buf)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return buf[:0], int64(m), false, err
	}
	return buf, int64(m), false, nil
}
