package mailstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// Checkpoint is a binding's durable forward progress within one UIDVALIDITY:
// every UID up to LastSeenUID has been stored or deliberately passed.
type Checkpoint struct {
	FolderID      int64
	UIDValidity   uint32
	LastSeenUID   uint32
	HighestModSeq *uint64
	// Cycle is the reconciliation cycle in progress, nil when none is.
	// The passes write it through StartReconcileCycle,
	// CompleteReconcileCycle and ForgetModSeq; AdvanceCheckpoint keeps it
	// within one UIDVALIDITY and drops it with a reset.
	Cycle *ReconcileCycle
	// SynchronizedAt is when the run that wrote it synchronized; zero in a
	// next checkpoint means the database's now().
	SynchronizedAt time.Time
}

// ErrCheckpointRegression rejects a checkpoint that would move last_seen_uid
// backwards within one UIDVALIDITY. Only a reset (a next checkpoint under
// another UIDVALIDITY) starts a folder's UIDs again.
var ErrCheckpointRegression = errors.New("mailstore: a checkpoint never moves backwards within one UIDVALIDITY")

// ReadCheckpoint returns the binding's checkpoint, and false when the
// binding was never synchronized.
func ReadCheckpoint(ctx context.Context, q Querier, folderID int64) (Checkpoint, bool, error) {
	var (
		validity, last int64
		modseq         *int64
		cycleModSeq    *int64
		cycleStarted   *time.Time
		c              = Checkpoint{FolderID: folderID}
	)
	err := q.QueryRow(ctx,
		`SELECT uid_validity, last_seen_uid, highest_modseq, synchronized_at,
		        reconcile_cycle_modseq, reconcile_cycle_started_at
		 FROM synchronization_checkpoints WHERE mail_folder_id = $1`,
		folderID).Scan(&validity, &last, &modseq, &c.SynchronizedAt, &cycleModSeq, &cycleStarted)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Checkpoint{}, false, nil
	case err != nil:
		return Checkpoint{}, false, fmt.Errorf("mailstore: read the checkpoint of folder %d: %w", folderID, err)
	}
	c.UIDValidity, c.LastSeenUID = uint32(validity), uint32(last)
	if modseq != nil {
		m := uint64(*modseq)
		c.HighestModSeq = &m
	}
	if cycleModSeq != nil && cycleStarted != nil {
		c.Cycle = &ReconcileCycle{ModSeq: uint64(*cycleModSeq), StartedAt: *cycleStarted}
	}
	return c, true, nil
}

// AdvanceCheckpoint writes next as the binding's checkpoint, guarded by the
// progress the run read at its start:
//
//   - expected nil: the binding had no checkpoint; next is inserted, and a
//     checkpoint another run inserted meanwhile is ErrConcurrencyConflict;
//   - otherwise the row is updated only while its UIDVALIDITY and
//     last-seen UID still equal expected's (synchronization timestamps are
//     not compared), and a row that moved is ErrConcurrencyConflict.
//
// A next checkpoint under another UIDVALIDITY than expected's is a reset and
// may carry any UID; under the same one, a LastSeenUID below expected's is
// ErrCheckpointRegression. The later of the stored and the new
// synchronization time is kept. next.Cycle is ignored: a reconciliation
// cycle in progress is kept under the same UIDVALIDITY and dropped by a
// reset, whose UID space it does not describe. A conflict leaves the caller's transaction
// usable; checkpoint writes are not retried.
func AdvanceCheckpoint(ctx context.Context, q Querier, expected *Checkpoint, next Checkpoint) error {
	if err := validateNext(expected, next); err != nil {
		return err
	}
	var modseq *int64
	if next.HighestModSeq != nil {
		m := int64(*next.HighestModSeq)
		modseq = &m
	}
	var at *time.Time
	if !next.SynchronizedAt.IsZero() {
		at = &next.SynchronizedAt
	}

	if expected == nil {
		tag, err := q.Exec(ctx,
			`INSERT INTO synchronization_checkpoints (mail_folder_id, uid_validity, last_seen_uid, highest_modseq, synchronized_at)
			 VALUES ($1, $2, $3, $4, coalesce($5, now()))
			 ON CONFLICT ON CONSTRAINT synchronization_checkpoints_pkey DO NOTHING`,
			next.FolderID, int64(next.UIDValidity), int64(next.LastSeenUID), modseq, at)
		switch {
		case err != nil:
			return fmt.Errorf("mailstore: insert the first checkpoint of folder %d: %w", next.FolderID, err)
		case tag.RowsAffected() == 0:
			return conflict("folder %d: another run wrote its first checkpoint", next.FolderID)
		}
		return nil
	}

	tag, err := q.Exec(ctx,
		`UPDATE synchronization_checkpoints
		 SET uid_validity = $4, last_seen_uid = $5, highest_modseq = $6,
		     reconcile_cycle_modseq = CASE WHEN $4 = $2 THEN reconcile_cycle_modseq END,
		     reconcile_cycle_started_at = CASE WHEN $4 = $2 THEN reconcile_cycle_started_at END,
		     synchronized_at = greatest(synchronized_at, coalesce($7, now()))
		 WHERE mail_folder_id = $1 AND uid_validity = $2 AND last_seen_uid = $3`,
		next.FolderID, int64(expected.UIDValidity), int64(expected.LastSeenUID),
		int64(next.UIDValidity), int64(next.LastSeenUID), modseq, at)
	switch {
	case err != nil:
		return fmt.Errorf("mailstore: advance the checkpoint of folder %d: %w", next.FolderID, err)
	case tag.RowsAffected() == 0:
		return conflict("folder %d: its checkpoint moved or vanished since this run read it", next.FolderID)
	}
	return nil
}

func validateNext(expected *Checkpoint, next Checkpoint) error {
	switch {
	case next.FolderID == 0:
		return errors.New("mailstore: advance checkpoint: no folder id")
	case next.UIDValidity == 0:
		return fmt.Errorf("mailstore: advance checkpoint of folder %d: UIDVALIDITY 0 is not a valid scope", next.FolderID)
	case next.HighestModSeq != nil && *next.HighestModSeq > math.MaxInt64:
		return fmt.Errorf("mailstore: advance checkpoint of folder %d: HIGHESTMODSEQ %d exceeds 63 bits", next.FolderID, *next.HighestModSeq)
	case expected == nil:
		return nil
	case expected.FolderID != next.FolderID:
		return fmt.Errorf("mailstore: advance checkpoint: expected progress of folder %d, next of folder %d", expected.FolderID, next.FolderID)
	case expected.UIDValidity == next.UIDValidity && next.LastSeenUID < expected.LastSeenUID:
		return fmt.Errorf("%w: folder %d, UIDVALIDITY %d, UID %d after %d",
			ErrCheckpointRegression, next.FolderID, next.UIDValidity, next.LastSeenUID, expected.LastSeenUID)
	}
	return nil
}
