// The reconciliation cycle: how a folder larger than one window earns the
// modification sequence that lets later passes ask only what changed.
//
// A window covers a bounded part of a folder, so the sequence a server
// reports while one window is asked about says nothing about the rows that
// window never reached. A cycle therefore begins by writing down the
// sequence a pass observed and when, and ends once every live occurrence of
// the folder has been observed since that moment: each was then asked about
// after the server had reached that sequence, so nothing older than it is
// unaccounted for, and the sequence becomes the checkpoint's highest_modseq.
//
// A folder's first synchronization is its first cycle. The forward pass
// that walks a UID space from its start begins one with the HIGHESTMODSEQ
// of its EXAMINE, before its first fetch, and the flags every fetch after
// it returns are stored as observations (Occurrence.FlagsObservedAt); once
// the forward pass has walked the UID space to its end it completes the
// cycle by the same rule a reconciliation window does, so the next window
// already asks only what changed. A forward pass that ends earlier (its
// batch bound, a kill) leaves the cycle in progress for the next pass to
// carry on: the UIDs it never read are not stored, and a cycle records
// nothing before the walk has reached them.

package mailstore

import (
	"context"
	"fmt"
	"time"
)

// ReconcileCycle is a reconciliation cycle in progress: the modification
// sequence the pass that began it observed — a backward pass's question,
// or the EXAMINE of a forward pass that walks a UID space from its start —
// and a moment around that observation: just before the backward pass's
// question, just after the forward pass's EXAMINE answered. Every live
// occurrence observed at or after StartedAt was answered by a server that
// had reached ModSeq, because a folder's passes never run at once: nothing
// else asks the server between StartedAt and the answer that reported it.
type ReconcileCycle struct {
	ModSeq    uint64
	StartedAt time.Time
}

// StartReconcileCycle records c as the cycle in progress of folderID under
// uidValidity, unless one already is (a cycle is never restarted by a later
// pass, which would postpone its end indefinitely on a busy folder) or the
// checkpoint is under another UIDVALIDITY. It reports whether c was
// recorded. Call it in the transaction that applies the pass's window, so a
// pass that never commits starts nothing.
func StartReconcileCycle(ctx context.Context, q Querier, folderID int64, uidValidity uint32, c ReconcileCycle) (bool, error) {
	if c.ModSeq == 0 || c.ModSeq > 1<<63-1 {
		return false, nil
	}
	tag, err := q.Exec(ctx, `UPDATE synchronization_checkpoints
		SET reconcile_cycle_modseq = $3, reconcile_cycle_started_at = $4
		WHERE mail_folder_id = $1 AND uid_validity = $2 AND reconcile_cycle_modseq IS NULL`,
		folderID, int64(uidValidity), int64(c.ModSeq), c.StartedAt)
	if err != nil {
		return false, fmt.Errorf("mailstore: start a reconciliation cycle: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// CompleteReconcileCycle ends the cycle in progress of folderID under
// uidValidity if it is complete — no live occurrence under uidValidity is
// unobserved or was last observed before the cycle started — by recording
// its sequence as the checkpoint's highest_modseq. It reports whether it
// did. Both checks are index-only probes of the reconciliation queue's two
// indexes that stop at the first row found. Rows of another UIDVALIDITY
// do not count: no window asks about them.
func CompleteReconcileCycle(ctx context.Context, q Querier, folderID int64, uidValidity uint32) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE synchronization_checkpoints c
		SET highest_modseq = c.reconcile_cycle_modseq,
		    reconcile_cycle_modseq = NULL, reconcile_cycle_started_at = NULL
		WHERE c.mail_folder_id = $1 AND c.uid_validity = $2 AND c.reconcile_cycle_modseq IS NOT NULL
		  AND NOT EXISTS (SELECT 1 FROM stored_emails e
		      WHERE e.mail_folder_id = $1 AND e.uid_validity = $2
		        AND e.remote_expunge_observed_at IS NULL AND e.remote_flags_observed_at IS NULL)
		  AND NOT EXISTS (SELECT 1 FROM stored_emails e
		      WHERE e.mail_folder_id = $1 AND e.uid_validity = $2
		        AND e.remote_expunge_observed_at IS NULL AND e.remote_flags_observed_at IS NOT NULL
		        AND e.remote_flags_observed_at < c.reconcile_cycle_started_at)`,
		folderID, int64(uidValidity))
	if err != nil {
		return false, fmt.Errorf("mailstore: complete the reconciliation cycle: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ForgetModSeq drops the modification sequence and any cycle in progress of
// folderID under uidValidity: the server no longer reports sequences for
// the folder (it lost CONDSTORE, or the folder reports NOMODSEQ), or
// reports one below what was recorded. What was recorded then no longer
// says what a later question may leave out, and a new cycle starts once
// sequences are reported again.
func ForgetModSeq(ctx context.Context, q Querier, folderID int64, uidValidity uint32) error {
	_, err := q.Exec(ctx, `UPDATE synchronization_checkpoints
		SET highest_modseq = NULL, reconcile_cycle_modseq = NULL, reconcile_cycle_started_at = NULL
		WHERE mail_folder_id = $1 AND uid_validity = $2
		  AND (highest_modseq IS NOT NULL OR reconcile_cycle_modseq IS NOT NULL)`,
		folderID, int64(uidValidity))
	if err != nil {
		return fmt.Errorf("mailstore: forget the modification sequence: %w", err)
	}
	return nil
}
