package forwardpass

import (
	"context"
	"errors"
	"slices"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// errStreamAbandoned ends the body fetch of a stream whose batch no longer
// wants it.
var errStreamAbandoned = errors.New("forwardpass: the batch stopped reading its messages")

// bodyStream reads one batch's messages from the session on a goroutine
// of its own — the metadata first, then the content of every message not
// over MaxRawMimeBytes by declared size, in chunks of FetchChunkBytes —
// and hands each body over on bodies, as a copy, while the batch writes
// the ones before; then it reads the following batch's metadata, asked
// for in the same flight as the last bodies where the session can
// (pipelinedSession). What was read and not yet taken is bounded by
// ReadAheadBytes: at the bound the stream stops reading and the server's
// data waits in the connection. So the link keeps carrying mail while the
// database writes, and while a batch commits the next batch's stream
// already reads.
//
// While the stream runs, it alone drives the session; end (normally by
// taking every body, or by abandon) hands it back. It only reads, with the
// session's BODY.PEEK, and decides nothing about what is written: the
// batch drops what its join carried or its metadata left out.
type bodyStream struct {
	// first is the first UID the stream was started for, before the
	// batch's join.
	first uint32
	// metaReady is closed once meta, metaAt and metaErr are set. A
	// metadata failure is the batch's, and no body follows it. metaAt is
	// when the FETCH that returned meta was sent: the flags in meta are an
	// observation made no earlier.
	metaReady chan struct{}
	meta      []imapx.MessageMetadata
	metaAt    time.Time
	metaErr   error
	// identities are the server's identities of the batch's messages
	// (FetchIdentities), read with the metadata; nil where the server
	// names none. With identities the stream asks for no content before
	// the batch has said (decide) which messages it already holds.
	// planned is closed once the stream knows what it asks for (cutAt
	// included).
	identities map[uint32]imapx.MessageIdentity
	decision   chan map[uint32]mailstore.SharedEmail
	planned    chan struct{}
	// bodies carries the messages read, in the order the server sent them;
	// it is closed when the fetch has ended. Then requested and err are
	// set: the UIDs whose content was asked for, and the fetch's failure.
	bodies    chan imapx.Body
	requested []uint32
	err       error
	// cutAt, when not 0, is the first UID the stream left for lack of
	// download allowance, cutSize its declared size; it asked for nothing
	// from there on. Both are set before metaReady is closed.
	cutAt   uint32
	cutSize int64
	// following is the batch after this one. With its own last bodies
	// (pipelined), or once they are read, the stream reads following's
	// metadata (followingRead, followingMeta, followingErr, set when done
	// is closed), so following's stream can ask for content at once.
	following       []uint32
	followingRead   bool
	followingMeta   []imapx.MessageMetadata
	followingIDs    map[uint32]imapx.MessageIdentity
	followingMetaAt time.Time
	followingErr    error

	budget *semaphore.Weighted
	limit  int64
	// quit, once cancelled, makes the stream drop what it reads and end;
	// done is closed when its goroutine has ended.
	quit context.Context
	stop context.CancelFunc
	done chan struct{}
}

// startStream starts reading uids, which must not be empty, and then
// following's metadata. from, when not nil, is the stream before, whose
// end the new one waits for before it touches the session, and whose
// reading of following's metadata it takes when that was uids'.
func (p *pass) startStream(ctx context.Context, uids, following []uint32, from *bodyStream) *bodyStream {
	quit, stop := context.WithCancel(ctx)
	s := &bodyStream{
		first:     uids[0],
		metaReady: make(chan struct{}),
		decision:  make(chan map[uint32]mailstore.SharedEmail, 1),
		planned:   make(chan struct{}),
		bodies:    make(chan imapx.Body, 16),
		following: following,
		budget:    semaphore.NewWeighted(p.opts.ReadAheadBytes),
		limit:     p.opts.ReadAheadBytes,
		quit:      quit,
		stop:      stop,
		done:      make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if from != nil {
			<-from.done
		}
		s.read(ctx, p, uids, from)
		if s.metaErr == nil && s.err == nil && s.cutAt == 0 && len(following) > 0 && !s.followingRead && quit.Err() == nil {
			s.followingMetaAt = time.Now()
			s.followingMeta, s.followingIDs, s.followingErr = p.readMetadata(ctx, following)
			s.followingRead = true
		}
	}()
	return s
}

// readMetadata reads uids' metadata and, where the server names its
// messages, their identities.
func (p *pass) readMetadata(ctx context.Context, uids []uint32) ([]imapx.MessageMetadata, map[uint32]imapx.MessageIdentity, error) {
	meta, err := p.sess.FetchMetadata(ctx, uids)
	if err != nil || p.sess.IdentityScheme() == imapx.NoIdentity {
		return meta, nil, err
	}
	ids, err := p.sess.FetchIdentities(ctx, uids)
	return meta, ids, err
}

// decide tells the stream which of its messages are already stored
// (their content is not asked for); the batch calls it once, after
// metadata, also when it fails (nil).
func (s *bodyStream) decide(shared map[uint32]mailstore.SharedEmail) {
	s.decision <- shared
}

// read reads uids' metadata (or takes it from from) and content, and
// closes bodies.
func (s *bodyStream) read(ctx context.Context, p *pass, uids []uint32, from *bodyStream) {
	defer close(s.bodies)
	planned := false
	defer func() {
		if !planned {
			close(s.planned)
		}
	}()
	if from != nil && from.followingRead && len(from.following) > 0 && from.following[0] == uids[0] {
		s.meta, s.identities, s.metaAt, s.metaErr = from.followingMeta, from.followingIDs, from.followingMetaAt, from.followingErr
	} else {
		s.metaAt = time.Now()
		s.meta, s.identities, s.metaErr = p.readMetadata(ctx, uids)
	}
	if s.metaErr != nil {
		close(s.metaReady)
		return
	}
	close(s.metaReady)
	var shared map[uint32]mailstore.SharedEmail
	if len(s.identities) > 0 {
		// Only the batch can ask the database which of them are stored,
		// once its previous batch has committed: on a server that names
		// its messages, content is read ahead no further than that.
		select {
		case shared = <-s.decision:
		case <-s.quit.Done():
			s.err = errStreamAbandoned
			return
		}
	}
	size := make(map[uint32]int64, len(s.meta))
	for _, m := range s.meta {
		size[m.UID] = m.Size
	}
	fetch := make([]uint32, 0, len(uids))
	for _, u := range uids {
		sz, ok := size[u]
		if _, held := shared[u]; !ok || held || sz > p.opts.MaxRawMimeBytes {
			continue
		}
		if p.opts.MaxDownloadBytes > 0 && (p.cut || sz > p.allowance) {
			// The allowance cannot hold it: nothing from here on is
			// asked for, in this batch or a later one.
			p.cut = true
			s.cutAt, s.cutSize = u, sz
			break
		}
		p.allowance -= sz
		p.requested += sz
		fetch = append(fetch, u)
	}
	s.requested = slices.Clone(fetch)
	planned = true
	close(s.planned)
	for len(fetch) > 0 {
		if s.quit.Err() != nil {
			// Abandoned: nothing more is asked for.
			s.err = errStreamAbandoned
			return
		}
		n, total := 0, int64(0)
		for n < len(fetch) && (n == 0 || total+size[fetch[n]] <= p.opts.FetchChunkBytes) {
			total += size[fetch[n]]
			n++
		}
		var err error
		if ps, ok := s.pipelined(p); ok && n == len(fetch) {
			s.followingMetaAt = time.Now()
			s.followingMeta, s.followingErr, err = ps.FetchBodiesThenMetadata(ctx, fetch, p.opts.MaxRawMimeBytes, s.put, s.following)
			s.followingRead = err == nil
		} else {
			err = p.sess.FetchBodies(ctx, fetch[:n], p.opts.MaxRawMimeBytes, s.put)
		}
		if err != nil {
			s.err = err
			return
		}
		fetch = fetch[n:]
	}
}

// pipelinedSession is a Session that can ask for the following batch's
// metadata in the same flight as a batch's last bodies
// (mailsession.Session): on a long link that saves the round trip the
// metadata FETCH would otherwise wait for.
type pipelinedSession interface {
	FetchBodiesThenMetadata(ctx context.Context, uids []uint32, maxBytes int64, fn func(imapx.Body) error, next []uint32) (meta []imapx.MessageMetadata, metaErr, err error)
}

// pipelined returns p's session as a pipelinedSession when the stream's
// last bodies can take the following batch's metadata along: there is a
// following batch, the stream cut nothing for the download allowance, and
// the server names no identities, which are asked for beside the
// metadata (readMetadata).
func (s *bodyStream) pipelined(p *pass) (pipelinedSession, bool) {
	ps, ok := p.sess.(pipelinedSession)
	return ps, ok && len(s.following) > 0 && s.cutAt == 0 && p.sess.IdentityScheme() == imapx.NoIdentity
}

// put hands one body over, waiting while ReadAheadBytes are taken up.
func (s *bodyStream) put(b imapx.Body) error {
	if err := s.budget.Acquire(s.quit, s.weight(b)); err != nil {
		return errStreamAbandoned
	}
	if b.Raw != nil {
		b.Raw = slices.Clone(b.Raw)
	}
	select {
	case s.bodies <- b:
		return nil
	case <-s.quit.Done():
		return errStreamAbandoned
	}
}

// release gives back the budget a body taken from bodies held.
func (s *bodyStream) release(b imapx.Body) { s.budget.Release(s.weight(b)) }

// weight is a body's share of the budget: its size, but never more than
// the whole budget, so a message larger than ReadAheadBytes is read alone.
func (s *bodyStream) weight(b imapx.Body) int64 {
	return min(max(int64(len(b.Raw)), 1), s.limit)
}

// metadata waits for the stream's metadata and returns it with when its
// FETCH was sent.
func (s *bodyStream) metadata() ([]imapx.MessageMetadata, time.Time, error) {
	<-s.metaReady
	return s.meta, s.metaAt, s.metaErr
}

// abandon stops the stream, dropping what it has not handed over, and
// returns once it has handed the session back. A body fetch in flight is
// read to its end and dropped, so the session stays usable. It is a no-op
// on a nil stream and safe to call more than once.
func (s *bodyStream) abandon() {
	if s == nil {
		return
	}
	s.stop()
	<-s.done
}
