package synchronizer

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/extraction"
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
// held. Writes alternate between the writer's lanes — the pass's own
// connection and, when the pass has one, a second — so two PostgreSQL
// backends store messages at once while the session reads the next; a
// lane's previous answer is read just before its next write is sent. The
// lanes commit together at the end of a group; a crash between the two
// commits leaves only idempotent writes for the next pass to repeat, and
// the checkpoint moves only after both committed.
type writer struct {
	lanes         []*lane
	next          int
	groupMessages int
	groupBytes    int64
	extraction    mimex.Limits

	// lastReadable reports whether the last payload written was readable
	// MIME.
	lastReadable bool

	messages int
	bytes    int64
}

// lane is one connection's open transaction and its write in flight.
type lane struct {
	db      DB
	tx      pgx.Tx
	pending *searchindex.PendingOccurrence
}

func newWriter(dbs []DB, groupMessages int, groupBytes int64, lim mimex.Limits) *writer {
	w := &writer{groupMessages: groupMessages, groupBytes: groupBytes, extraction: lim}
	for _, db := range dbs {
		w.lanes = append(w.lanes, &lane{db: db})
	}
	return w
}

// wait reads the answer of the lane's write in flight, if any.
func (l *lane) wait() error {
	if l.pending == nil {
		return nil
	}
	p := l.pending
	l.pending = nil
	_, err := p.Wait()
	return err
}

func (w *writer) write(ctx context.Context, o mailstore.Occurrence) error {
	// The extraction runs before the write so the stored_emails row is
	// written once, and the message's statements go in one round trip.
	var rec *searchindex.Record
	if o.Raw != nil {
		r := extraction.Record(uuid.Nil, o.Raw, w.extraction)
		w.lastReadable = r.Readable
		rec = &r
	}
	l := w.lanes[w.next]
	w.next = (w.next + 1) % len(w.lanes)
	if err := l.wait(); err != nil {
		return err
	}
	if l.tx == nil {
		tx, err := l.db.Begin(ctx)
		if err != nil {
			return fmt.Errorf("synchronizer: begin: %w", err)
		}
		l.tx = tx
	}
	p, err := searchindex.SendOccurrence(ctx, l.tx, o, rec)
	if err != nil {
		return err
	}
	l.pending = p
	w.messages++
	w.bytes += int64(len(o.Raw))
	if w.messages >= w.groupMessages || w.bytes >= w.groupBytes {
		return w.commit(ctx)
	}
	return nil
}

// commit reads every answer in flight and commits every lane.
func (w *writer) commit(ctx context.Context) error {
	w.messages, w.bytes = 0, 0
	for _, l := range w.lanes {
		if err := l.wait(); err != nil {
			return err
		}
	}
	for _, l := range w.lanes {
		if l.tx == nil {
			continue
		}
		tx := l.tx
		l.tx = nil
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("synchronizer: commit: %w", err)
		}
	}
	return nil
}

func (w *writer) rollback(ctx context.Context) {
	var errs []error
	for _, l := range w.lanes {
		errs = append(errs, l.wait())
		if l.tx != nil {
			_ = l.tx.Rollback(context.WithoutCancel(ctx))
			l.tx = nil
		}
	}
	_ = errors.Join(errs...)
}
