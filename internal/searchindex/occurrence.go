package searchindex

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// Batcher sends a batch of statements in one round trip; pgx.Tx satisfies
// it.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// SendOccurrence stores one fetched occurrence and what extraction found
// in its content: the stored_emails row is written once, with the
// extracted metadata (mailstore.UpsertOccurrence with o.Extracted), and
// the record's participants, attachments, search document and passages
// are written by an Enrichment. rec is nil when o carries no content (over
// the size limit); the occurrence then gets the envelope document. The
// behaviour is that of UpsertOccurrence followed by Write (or
// InsertEnvelopeDocument), and rec.StoredEmailID is set to the stored
// email's id.
//
// With e nil, the record's rows are written in the same round trip. With
// e, they are added to e, and e's statements go with this round trip only
// once e holds flushAt occurrences; the caller queues the rest
// (SendEnrichment) on the same connection before it commits.
//
// It sends the write and returns without reading the answer, so the
// server stores one message while the caller reads and extracts the next;
// the payload has been handed to the connection by then and is not held.
// The caller must Wait before using the connection again (pgx allows one
// batch in flight per connection), and an error surfaces at Wait.
func SendOccurrence(ctx context.Context, q Batcher, o mailstore.Occurrence, rec *Record, e *Enrichment, flushAt int) (*PendingOccurrence, error) {
	if (rec == nil) != (o.Raw == nil) {
		return nil, fmt.Errorf("searchindex: write occurrence (folder %d, UID %d): a record goes with content and only with it", o.FolderID, o.UID)
	}
	if rec != nil {
		o.Extracted = extracted(rec)
	}
	b := &pgx.Batch{}
	var res mailstore.Upserted
	if err := mailstore.QueueUpsertOccurrence(b, o, &res); err != nil {
		return nil, err
	}
	if e == nil {
		e, flushAt = &Enrichment{}, 1
	}
	if err := e.Add(o, rec); err != nil {
		return nil, err
	}
	if e.Len() >= flushAt {
		e.Queue(b)
	}
	p := &PendingOccurrence{results: q.SendBatch(ctx, b), res: &res, rec: rec, folderID: o.FolderID, uid: o.UID}
	return p, nil
}

// PendingOccurrence is a write SendOccurrence sent and nobody has read the
// answer of yet. Wait must be called before the connection is used again.
type PendingOccurrence struct {
	results  pgx.BatchResults
	res      *mailstore.Upserted
	rec      *Record
	folderID int64
	uid      uint32
}

// Wait reads the server's answer and returns the stored email's id; it
// sets rec.StoredEmailID.
func (p *PendingOccurrence) Wait() (uuid.UUID, error) {
	if err := p.results.Close(); err != nil {
		if p.res.ID == uuid.Nil {
			return uuid.Nil, err // the upsert's own error, already described
		}
		return uuid.Nil, fmt.Errorf("searchindex: write the extraction of occurrence (folder %d, UID %d): %w", p.folderID, p.uid, err)
	}
	if p.rec != nil {
		p.rec.StoredEmailID = p.res.ID
	}
	return p.res.ID, nil
}

// WriteOccurrence is SendOccurrence followed by Wait.
func WriteOccurrence(ctx context.Context, q Batcher, o mailstore.Occurrence, rec *Record) (uuid.UUID, error) {
	p, err := SendOccurrence(ctx, q, o, rec, nil, 0)
	if err != nil {
		return uuid.Nil, err
	}
	return p.Wait()
}

// extracted is the part of rec stored on the stored_emails row, cleaned
// as Write cleans it.
func extracted(rec *Record) *mailstore.Extracted {
	if !rec.Readable {
		return &mailstore.Extracted{Failure: rec.Failure}
	}
	return &mailstore.Extracted{
		Readable: true,
		SentAt:   rec.SentAt, ReceivedAt: rec.ReceivedAt,
		Subject: clean(rec.Subject), MessageID: clean(rec.MessageID),
		InReplyTo: cleanAll(rec.InReplyTo), References: cleanAll(rec.References),
		AttachmentCount: rec.AttachmentCount, AttachmentDecodedBytes: rec.AttachmentDecodedBytes,
		InlineResourceCount: rec.InlineResourceCount,
		Encrypted:           rec.Encrypted, UnverifiedSignature: rec.UnverifiedSignature, TNEF: rec.TNEF,
	}
}
