package forwardpass

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/mimex"
)

// writer writes occurrences into open transactions, one round trip each as
// they arrive (so no payload waits in memory for a batch), and commits them
// in groups.
//
// A message's write is sent without waiting for its answer: the payload has
// been handed to the connection by then, so only the message being read is
// held. The writer has lanes — the pass's own connection and, when the pass
// has one, a second — so two PostgreSQL backends store messages at once
// while the session reads the next. Each write goes to a lane with nothing
// in flight, and when every lane is busy, to the first one whose answer
// arrives: what a message costs PostgreSQL varies tenfold with its size and
// text, and sending to the lanes in turn left one backend idle behind the
// other's large message. A goroutine per write in flight reads its answer,
// so the writer learns which lane is free without blocking on either. The
// lanes commit together at the end of a group; a crash between the two
// commits leaves only idempotent writes for the next pass to repeat, and
// the checkpoint moves only after both committed.
//
// A message's participants, attachments, search document and passages
// are not written by statements of its own: each lane gathers them
// (searchindex.Enrichment) and writes those of enrichEvery messages at
// once with the next message's round trip, and the rest before the group
// commits, in the transaction that wrote the messages' rows. PostgreSQL
// sets up each statement's executor, constraints and generated search
// vector once per statement, which cost more than the rows themselves
// when every message had five statements of its own.
//
// A group's writes are kept — payloads included — until the group
// commits, bounded by the group's message and byte bounds. A write or a
// commit another transaction got in the way of (mailstore.IsWriteConflict)
// rolls the group back and writes it again in fresh transactions, after a
// jittered wait, up to attempts times in all; nothing is fetched again.
// When the attempts are spent the conflict is returned as a
// *mailstore.ConcurrencyConflictError, which defers the pass.
type writer struct {
	lanes []*lane
	// answered receives a lane whose write in flight has been answered; the
	// lane's err holds the outcome.
	answered      chan *lane
	inFlight      int
	groupMessages int
	groupBytes    int64
	extraction    mimex.Limits

	// lastReadable reports whether the last payload written was readable
	// MIME.
	lastReadable bool

	messages int
	bytes    int64

	// attempts bounds how often one group is written (at least 1).
	attempts int
	// group is the writes since the last commit.
	group []groupWrite
	// spare is payload buffers of committed groups, for the next group's
	// copies; copying reports that write made any, so spare is kept only
	// for a writer that copies.
	spare   [][]byte
	copying bool
	// offer, when set, is what each lane's commit offers the stored-email
	// ids its own writes of the open group returned (Options.Offer).
	offer func(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error
}

// groupWrite is one write of the open group, kept until the group commits.
type groupWrite struct {
	o   mailstore.Occurrence
	rec *searchindex.Record
}

// lane is one connection's open transaction and its write in flight. While
// busy, the lane belongs to the goroutine reading the answer.
type lane struct {
	db   DB
	tx   pgx.Tx
	busy bool
	err  error
	// id is the stored email the answered write returned.
	id uuid.UUID
	// enrich holds what extraction found in the messages this lane's
	// transaction wrote and has not yet written the rows of.
	enrich searchindex.Enrichment
	// stored is the stored-email ids this lane's transaction wrote in the
	// open group: what its commit offers. The lanes commit apart, so an
	// offer made in one lane for another lane's messages could be worked
	// before those messages are visible, and find nothing to embed.
	stored []uuid.UUID
}

// enrichEvery is how many messages' extraction rows a lane writes at once
// while a group is open: enough that the statements' setup is shared by
// many messages, few enough that what is left to write when the group
// commits — while the pass waits — stays short.
const enrichEvery = 8

func newWriter(dbs []DB, groupMessages int, groupBytes int64, lim mimex.Limits, attempts int) *writer {
	w := &writer{groupMessages: groupMessages, groupBytes: groupBytes, extraction: lim, answered: make(chan *lane, len(dbs)), attempts: max(attempts, 1)}
	for _, db := range dbs {
		w.lanes = append(w.lanes, &lane{db: db})
	}
	return w
}

// dispatch hands the answer wait reads to a goroutine that reports the
// lane on answered.
func (w *writer) dispatch(l *lane, wait func() (uuid.UUID, error)) {
	l.busy = true
	w.inFlight++
	go func() {
		l.id, l.err = wait()
		w.answered <- l
	}()
}

// receive waits for one answer and returns its lane, idle again.
func (w *writer) receive() (*lane, error) {
	l := <-w.answered
	w.inFlight--
	l.busy = false
	err := l.err
	l.err = nil
	if err == nil && l.id != uuid.Nil {
		l.stored = append(l.stored, l.id)
	}
	return l, err
}

// idleLane returns a lane with nothing in flight, waiting for the first
// answer when every lane has a write in flight.
func (w *writer) idleLane() (*lane, error) {
	for _, l := range w.lanes {
		if !l.busy {
			return l, nil
		}
	}
	return w.receive()
}

// drain waits for every answer in flight and returns the first error.
func (w *writer) drain() error {
	var first error
	for w.inFlight > 0 {
		if _, err := w.receive(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// own returns a copy of raw in a buffer the writer owns until the group
// commits: the session reuses its buffer for the next message, and the
// group's payloads must stay intact for a write again after a conflict.
// Buffers of committed groups are reused, so the copy costs no allocation
// once the first groups have run.
func (w *writer) own(raw []byte) []byte {
	if raw == nil {
		return nil
	}
	for i := len(w.spare) - 1; i >= 0; i-- {
		if b := w.spare[i]; cap(b) >= len(raw) {
			w.spare[i] = w.spare[len(w.spare)-1]
			w.spare = w.spare[:len(w.spare)-1]
			return append(b[:0], raw...)
		}
	}
	return append(make([]byte, 0, len(raw)), raw...)
}

// recycle keeps the committed group's payload buffers for the next group,
// at most a group's worth, and none larger than a group's bytes bound.
func (w *writer) recycle() {
	if !w.copying {
		// Nothing would take them: every payload was handed over.
		return
	}
	for _, g := range w.group {
		if b := g.o.Raw; b != nil && int64(cap(b)) <= w.groupBytes && len(w.spare) < w.groupMessages {
			w.spare = append(w.spare, b)
		}
	}
}

// write writes o, keeping a copy of its payload (own): the caller may
// reuse o.Raw once it returns.
func (w *writer) write(ctx context.Context, o mailstore.Occurrence) error {
	if o.Raw != nil {
		w.copying = true
	}
	o.Raw = w.own(o.Raw)
	return w.writeOwned(ctx, o)
}

// writeOwned writes o and keeps its payload as it is until the group
// commits: the caller hands it over and neither changes nor reuses it.
// It saves the copy (and, for the largest message, its memory) that write
// makes.
func (w *writer) writeOwned(ctx context.Context, o mailstore.Occurrence) error {
	// The extraction runs before the write so the stored_emails row is
	// written once, and the message's statements go in one round trip.
	var rec *searchindex.Record
	if o.Raw != nil {
		r := searchindex.Extract(uuid.Nil, o.Raw, w.extraction)
		w.lastReadable = r.Readable
		rec = &r
	}
	w.group = append(w.group, groupWrite{o: o, rec: rec})
	w.messages++
	w.bytes += int64(len(o.Raw))
	if err := w.send(ctx, o, rec); err != nil {
		return w.retryGroup(ctx, err)
	}
	if w.messages >= w.groupMessages || w.bytes >= w.groupBytes {
		return w.commit(ctx)
	}
	return nil
}

// send hands one write to an idle lane, opening its transaction first.
func (w *writer) send(ctx context.Context, o mailstore.Occurrence, rec *searchindex.Record) error {
	l, err := w.idleLane()
	if err != nil {
		return err
	}
	if l.tx == nil {
		tx, err := l.db.Begin(ctx)
		if err != nil {
			return fmt.Errorf("forwardpass: begin: %w", err)
		}
		l.tx = tx
	}
	p, err := searchindex.SendOccurrence(ctx, l.tx, o, rec, &l.enrich, enrichEvery)
	if err != nil {
		return err
	}
	if o.SharedEmailID != uuid.Nil {
		// An occurrence of an email already stored: the email was
		// offered for embedding when it was stored, and is not again —
		// unless it was not served then, when an embed job may have
		// passed it by.
		holder := uuid.Nil
		if o.SharedUnserved {
			holder = o.SharedEmailID
		}
		w.dispatch(l, func() (uuid.UUID, error) {
			_, err := p.Wait()
			return holder, err
		})
		return nil
	}
	w.dispatch(l, p.Wait)
	return nil
}

// commit reads every answer in flight and commits every lane, writing the
// group again when another transaction got in its way. It returns only
// when every commit has been answered, so a caller that moves the
// checkpoint afterwards never moves it past an uncommitted row.
func (w *writer) commit(ctx context.Context) error {
	if err := w.commitLanes(ctx); err != nil {
		return w.retryGroup(ctx, err)
	}
	w.endGroup()
	return nil
}

func (w *writer) endGroup() {
	w.recycle()
	clear(w.group)
	w.group = w.group[:0]
	w.clearStored()
	w.messages, w.bytes = 0, 0
}

// retryGroup handles err, which a write or a commit of the open group
// returned: a conflict rolls the group back and writes it again in fresh
// transactions, up to attempts times in all; anything else is returned.
func (w *writer) retryGroup(ctx context.Context, err error) error {
	for attempt := 1; mailstore.IsWriteConflict(err); attempt++ {
		w.rollback(ctx)
		if attempt >= w.attempts {
			return &mailstore.ConcurrencyConflictError{Reason: fmt.Sprintf("a write group gave up after %d attempts: %s", w.attempts, mailstore.ConflictReason(err))}
		}
		if werr := mailstore.ConflictBackoff(ctx, attempt); werr != nil {
			return fmt.Errorf("forwardpass: waiting to write a group again: %w", werr)
		}
		err = w.replay(ctx)
	}
	if err == nil {
		w.endGroup()
	}
	return err
}

// replay writes the open group again and commits it.
func (w *writer) replay(ctx context.Context) error {
	if err := w.reshare(ctx); err != nil {
		return err
	}
	for _, g := range w.group {
		if err := w.send(ctx, g.o, g.rec); err != nil {
			return err
		}
	}
	return w.commitLanes(ctx)
}

// reshare turns the group's writes of a message another pass stored
// meanwhile — the same server identity, which is what a conflict on it
// means — into occurrences of that email: their content is dropped, and
// the write again is one of an occurrence, so two folders' passes that
// fetched one message at once store it once. It reads on the first lane,
// whose transaction has been rolled back.
func (w *writer) reshare(ctx context.Context) error {
	var keys []string
	for _, g := range w.group {
		if g.o.ServerEmailID != "" && g.o.SharedEmailID == uuid.Nil {
			keys = append(keys, g.o.ServerEmailID)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	held, err := mailstore.EmailsByServerIdentity(ctx, w.lanes[0].db, w.group[0].o.AccountID, keys)
	if err != nil {
		return err
	}
	for i := range w.group {
		g := &w.group[i]
		e, ok := held[g.o.ServerEmailID]
		if !ok || g.o.SharedEmailID != uuid.Nil {
			continue
		}
		g.o.SharedEmailID, g.o.SharedUnserved, g.o.Availability, g.o.Raw, g.o.Extracted, g.rec = e.ID, !e.Served, e.Availability, nil, nil, nil
	}
	return nil
}

// commitLanes reads every answer in flight and commits every lane.
func (w *writer) commitLanes(ctx context.Context) error {
	if err := w.drain(); err != nil {
		return err
	}
	// Every lane writes the extraction rows it still holds, at once.
	for _, l := range w.lanes {
		if l.tx != nil && l.enrich.Len() > 0 {
			p := searchindex.SendEnrichment(ctx, l.tx, &l.enrich)
			w.dispatch(l, func() (uuid.UUID, error) { return uuid.Nil, p.Wait() })
		}
	}
	if err := w.drain(); err != nil {
		return err
	}
	if w.offer != nil {
		// The lanes' offers are one group's (OfferGroup).
		gctx := context.WithValue(ctx, offerGroupKey{}, new(offerGroup))
		for _, l := range w.lanes {
			if l.tx != nil && len(l.stored) > 0 {
				if err := w.offer(gctx, l.tx, l.stored); err != nil {
					return err
				}
			}
		}
	}
	// The lanes' commits are sent at once, so their WAL flushes overlap
	// rather than queue.
	errs := make(chan error, len(w.lanes))
	n := 0
	for _, l := range w.lanes {
		if l.tx == nil {
			continue
		}
		tx := l.tx
		l.tx = nil
		n++
		go func() { errs <- tx.Commit(ctx) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = fmt.Errorf("forwardpass: commit: %w", err)
		}
	}
	return first
}

func (w *writer) rollback(ctx context.Context) {
	_ = w.drain()
	w.clearStored()
	for _, l := range w.lanes {
		l.enrich = searchindex.Enrichment{}
		if l.tx != nil {
			_ = l.tx.Rollback(context.WithoutCancel(ctx))
			l.tx = nil
		}
	}
}

// clearStored forgets the ids the lanes wrote in the open group.
func (w *writer) clearStored() {
	for _, l := range w.lanes {
		l.stored = l.stored[:0]
	}
}

// offerGroup identifies one write group's offers.
type offerGroup struct{ _ byte }

type offerGroupKey struct{}

// OfferGroup returns what identifies the write group whose offer ctx is
// (Options.Offer): the offers of one group's transactions, made one after
// another before any commits, return the same value, and another group's
// return another; nil outside a group. An offer that bounds a backlog
// shares its count across one group's transactions by it, since none of
// them sees what another queued.
func OfferGroup(ctx context.Context) any {
	g, _ := ctx.Value(offerGroupKey{}).(*offerGroup)
	if g == nil {
		return nil
	}
	return g
}
