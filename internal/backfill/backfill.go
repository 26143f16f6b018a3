// Package backfill runs one batch of the extraction backfill: it re-reads
// the raw MIME of messages stored before extraction existed (content but no
// search document), writes their classification markers and metadata
// before the text derived from them, and records the position it reached —
// all in the caller's transaction, so a committed position always
// describes committed work.
//
// The position is what makes the walk finite: a message no reader can
// parse is counted, stepped over and left with its envelope document. A
// batch stops early once it has written enough text (the batch size bounds
// messages, the extraction bound characters, and the two multiply); the
// position is then the last message it read. It reaches no mail server.
//
// The messages a batch wrote passages for are offered for embedding in the
// same transaction (Options.Offer), so a batch that commits has either
// queued their embedding or, with a full backlog, the embedding backfill
// that will.
package backfill

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/mimex"
)

// Options bound one batch.
type Options struct {
	// BatchSize is the most messages one batch reads. Required.
	BatchSize int
	// TextBudget is the most text, in characters, one batch writes before
	// it stops early. Required.
	TextBudget int
	// Limits bound the MIME reader.
	Limits mimex.Limits
	// Offer, when set, runs in the batch's transaction with the messages
	// the batch wrote, in the order it read them: the embedding offer.
	// Optional.
	Offer func(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error
}

// Result is what one batch did.
type Result struct {
	// Read and Unreadable count the messages read and those no reader
	// could parse.
	Read, Unreadable int
	// Done reports that nothing awaits extraction past the batch: no
	// successor is needed.
	Done bool
}

// RunBatch runs one batch in tx.
func RunBatch(ctx context.Context, tx pgx.Tx, opts Options) (Result, error) {
	var res Result
	position, err := searchindex.BackfillPosition(ctx, tx)
	if err != nil {
		return res, err
	}
	ids, err := searchindex.AwaitingExtraction(ctx, tx, position, opts.BatchSize)
	if err != nil {
		return res, err
	}
	if len(ids) == 0 {
		res.Done = true
		return res, nil
	}
	written := 0
	last := position
	var wrote []uuid.UUID
	for _, id := range ids {
		raw, err := mailstore.RawMIME(ctx, tx, id)
		if err != nil {
			return res, err
		}
		rec := searchindex.Extract(id, raw, opts.Limits)
		if err := searchindex.Write(ctx, tx, rec); err != nil {
			return res, err
		}
		res.Read++
		wrote = append(wrote, id)
		if !rec.Readable {
			res.Unreadable++
		}
		last = id
		written += len(rec.Text) + len(rec.Untrimmed)
		if written >= opts.TextBudget {
			break
		}
	}
	if err := searchindex.SaveBackfillPosition(ctx, tx, last); err != nil {
		return res, err
	}
	if opts.Offer != nil {
		if err := opts.Offer(ctx, tx, wrote); err != nil {
			return res, err
		}
	}
	// A short batch read to its end reached the last message awaiting
	// extraction.
	res.Done = res.Read == len(ids) && len(ids) < opts.BatchSize
	return res, nil
}
