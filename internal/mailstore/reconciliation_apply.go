package mailstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Disposition is what happens locally to mail the server no longer holds.
type Disposition string

// The dispositions, by their configuration names.
const (
	// RetainTombstone keeps the row and records when the disappearance was
	// observed; every mailbox query excludes it from then on.
	RetainTombstone Disposition = "RetainTombstone"
	// EraseLocalCopy removes the row, and with it (ON DELETE CASCADE) the
	// raw MIME, the search document, participants and attachments. An
	// email another occurrence still shows (the same server identity in
	// another folder) is not erased: its own occurrence is tombstoned, and
	// the email is erased with the last occurrence that leaves.
	EraseLocalCopy Disposition = "EraseLocalCopy"
)

// ReconcileAnswer is what the server said about a window's UIDs.
type ReconcileAnswer struct {
	// Present are the UIDs that still exist.
	Present map[uint32]bool
	// Flags are the UIDs the server described, with their flags. A UID
	// present but not described keeps its stored flags.
	Flags map[uint32][]string
	// Labels are the labels the server described with the flags (Gmail's
	// X-GM-LABELS), stored on the email; a UID without an entry keeps its
	// stored labels.
	Labels map[uint32][]string
}

// ReconcileResult counts what ApplyReconciliation did.
type ReconcileResult struct {
	Refreshed  int `json:"refreshed"`
	Confirmed  int `json:"confirmed"`
	Tombstoned int `json:"tombstoned"`
	Erased     int `json:"erased"`
	// Superseded are the window's rows another writer observed after the
	// window was taken: its answer supersedes this one, deletion included.
	Superseded int `json:"superseded"`
	// LeftByMailFathom are disappearances a mailbox mutation of
	// MailFathom's own accounts for (a relocation or a delete it issued):
	// no tombstone or erasure as for mail someone else removed. A
	// relocated row whose placement the server named keeps its place until
	// that placement is discovered; an email MailFathom deleted is hidden
	// (or erased) as its delete does. A relocation whose COPY was sent and
	// its answer never read accounts for no disappearance: a COPY leaves
	// the source where it was.
	LeftByMailFathom int `json:"left_by_mailfathom"`
	// RelocatedUnjoined are the LeftByMailFathom that were the source of a
	// relocation whose placement the server never named (no COPYUID, or a
	// MOVE whose answer was never read): no discovery can carry the row
	// across, so the destination's copy is stored as a discovery and is the
	// one served, and the source is tombstoned with the reason
	// RelocatedByMailFathom. It is tombstoned, not erased, under either
	// disposition: erasing it would erase the relocation's record with it,
	// and the message's content is kept locally anyway, in the
	// destination's copy.
	RelocatedUnjoined int `json:"relocated_unjoined"`
	// SeenByMailFathom are \Seen changes a completed mark-read or
	// mark-unread of MailFathom's own accounts for: the flag moved the way
	// the store asked, and the occurrence's last observation predates the
	// store's completion. The snapshot follows the server either way; this
	// only says whose act it was.
	SeenByMailFathom int `json:"seen_by_mailfathom"`
	// Withheld names each change of MailFathom's own the window
	// recognized: ids and kinds only.
	Withheld []WithheldChange `json:"-"`
}

// WithheldChange is one change of MailFathom's own a run recognized and
// withheld from what reacts to changes.
type WithheldChange struct {
	Kind       MutationKind `json:"kind"`
	MutationID uuid.UUID    `json:"mutation"`
	EmailID    uuid.UUID    `json:"email"`
}

// Gone is the number of disappearances this pass acted on.
func (r ReconcileResult) Gone() int { return r.Tombstoned + r.Erased }

// Add adds o's counts and withheld changes to r, for a pass that applied
// more than one answer.
func (r *ReconcileResult) Add(o ReconcileResult) {
	r.Refreshed += o.Refreshed
	r.Confirmed += o.Confirmed
	r.Tombstoned += o.Tombstoned
	r.Erased += o.Erased
	r.Superseded += o.Superseded
	r.LeftByMailFathom += o.LeftByMailFathom
	r.RelocatedUnjoined += o.RelocatedUnjoined
	r.SeenByMailFathom += o.SeenByMailFathom
	r.Withheld = append(r.Withheld, o.Withheld...)
}

type reconcileItem struct {
	ID uuid.UUID `json:"id"`
	// Folder, UIDValidity and UID are where the answer is about: it is
	// applied to the row only while the row is still that occurrence.
	Folder      int64    `json:"folder"`
	UIDValidity int64    `json:"uid_validity"`
	UID         int64    `json:"uid"`
	Kind        string   `json:"kind"`
	Flags       []string `json:"flags"`
	Labels      []string `json:"labels,omitempty"`
	// HasLabels tells an empty label list (every label removed) from none.
	HasLabels bool `json:"has_labels,omitempty"`
}

// ApplyReconciliation writes the answer for window w in one statement. Every write is
// idempotent and none moves state backwards: a tombstone keeps the time it
// was first observed, a row already erased is not an error, and a row whose
// stored observation is newer than the window is left alone entirely, so
// replaying a window after a commit conflict is safe.
func ApplyReconciliation(ctx context.Context, q Querier, w ReconcileWindow, a ReconcileAnswer, d Disposition) (ReconcileResult, error) {
	if d != RetainTombstone && d != EraseLocalCopy {
		return ReconcileResult{}, fmt.Errorf("mailstore: unknown disposition %q", d)
	}
	items := make([]reconcileItem, 0, len(w.Entries))
	for _, e := range w.Entries {
		switch flags, described := a.Flags[e.UID]; {
		case described:
			if flags == nil {
				flags = []string{}
			}
			item := reconcileItem{ID: e.ID, Folder: e.FolderID, UIDValidity: int64(e.UIDValidity), UID: int64(e.UID), Kind: "flags", Flags: flags}
			if labels, ok := a.Labels[e.UID]; ok {
				item.Labels, item.HasLabels = cleanTexts(labels), true
			}
			items = append(items, item)
		case a.Present[e.UID]:
			items = append(items, reconcileItem{ID: e.ID, Folder: e.FolderID, UIDValidity: int64(e.UIDValidity), UID: int64(e.UID), Kind: "present"})
		default:
			items = append(items, reconcileItem{ID: e.ID, Folder: e.FolderID, UIDValidity: int64(e.UIDValidity), UID: int64(e.UID), Kind: "gone"})
		}
	}
	if len(items) == 0 {
		return ReconcileResult{}, nil
	}
	input, err := json.Marshal(items)
	if err != nil {
		return ReconcileResult{}, fmt.Errorf("mailstore: encode answer: %w", err)
	}
	var r ReconcileResult
	err = q.QueryRow(ctx, `
		WITH input AS (
			SELECT * FROM jsonb_to_recordset($1::jsonb)
				AS x(id uuid, folder bigint, uid_validity bigint, uid bigint, kind text, flags text[], labels text[], has_labels boolean)
		),
		-- A row is answered for only while it is the occurrence the window
		-- asked about: one a relocation's join carried to its destination
		-- meanwhile is that occurrence no more.
		current AS (
			SELECT e.id, i.kind, i.flags, e.shared_email_id,
			       CASE WHEN i.has_labels THEN coalesce(i.labels, '{}') END AS labels
			FROM input i JOIN stored_emails e ON e.id = i.id
			 AND e.mail_folder_id = i.folder AND e.uid_validity = i.uid_validity AND e.uid = i.uid
			WHERE e.remote_expunge_observed_at IS NULL
			  AND (e.remote_flags_observed_at IS NULL OR e.remote_flags_observed_at <= $3)
		),
		-- An email whose own occurrence leaves while another occurrence of
		-- it lives is kept: it is tombstoned, never erased.
		still_shown AS (
			SELECT c.id FROM current c
			WHERE c.kind = 'gone' AND c.shared_email_id IS NULL AND EXISTS (
				SELECT 1 FROM stored_emails o
				WHERE o.shared_email_id = c.id AND o.remote_expunge_observed_at IS NULL
				  AND o.id NOT IN (SELECT id FROM current WHERE kind = 'gone'))
		),
		-- The email of an occurrence erased here, when that was the last
		-- occurrence showing it: erased with it.
		last_shown AS (
			SELECT DISTINCT c.shared_email_id AS id FROM current c
			JOIN stored_emails h ON h.id = c.shared_email_id
			WHERE c.kind = 'gone' AND $4 = 'EraseLocalCopy'
			  AND h.remote_expunge_observed_at IS NOT NULL AND h.remote_expunge_reason IS DISTINCT FROM 'RelocatedByMailFathom'
			  AND NOT EXISTS (
				SELECT 1 FROM stored_emails o
				WHERE o.shared_email_id = h.id AND o.remote_expunge_observed_at IS NULL
				  AND o.id NOT IN (SELECT id FROM current WHERE kind = 'gone'))
		),
		authored AS (
			SELECT DISTINCT ON (c.id) c.id, m.id AS mutation_id, m.mutation,
			       m.mutation = 'Relocate' AND m.placed_uid IS NULL AS unjoined
			FROM current c
			JOIN stored_emails e ON e.id = c.id
			JOIN mailbox_mutations m ON m.source_mail_folder_id = e.mail_folder_id
			 AND m.source_uid_validity = e.uid_validity AND m.source_uid = e.uid
			WHERE c.kind = 'gone' AND m.mutation IN ('Relocate', 'Delete')
			  AND m.stage <> 'Recorded' AND m.state <> 'DeadLettered'
			  AND NOT (m.stage = 'PlacementIssued' AND m.placement_path = 'Fallback')
			ORDER BY c.id, m.recorded_at
		),
		seen_authored AS (
			SELECT DISTINCT ON (c.id) c.id, m.id AS mutation_id, m.mutation
			FROM current c
			JOIN stored_emails e ON e.id = c.id
			JOIN mailbox_mutations m ON m.stored_email_id = e.id
			WHERE c.kind = 'flags' AND m.state = 'Completed' AND m.mutation IN ('MarkRead', 'MarkUnread')
			  AND (e.remote_flags_observed_at IS NULL OR e.remote_flags_observed_at < m.completed_at)
			  AND ((m.mutation = 'MarkRead' AND '\Seen' = ANY (c.flags) AND NOT '\Seen' = ANY (e.remote_flags))
			    OR (m.mutation = 'MarkUnread' AND NOT '\Seen' = ANY (c.flags) AND '\Seen' = ANY (e.remote_flags)))
			ORDER BY c.id, m.completed_at DESC
		),
		noted AS (
			UPDATE mailbox_mutations m SET source_left_observed_at = coalesce(m.source_left_observed_at, $2), updated_at = $2
			FROM authored a WHERE m.id = a.mutation_id AND NOT (a.mutation = 'Delete' AND $4 = 'EraseLocalCopy')
			RETURNING m.id
		),
		kept AS (
			UPDATE stored_emails e SET remote_flags_observed_at = $2
			FROM authored a WHERE e.id = a.id AND a.mutation = 'Relocate' AND NOT a.unjoined
			RETURNING e.id
		),
		relocated_unjoined AS (
			UPDATE stored_emails e SET remote_expunge_observed_at = $2, remote_expunge_reason = 'RelocatedByMailFathom', updated_at = $2
			FROM authored a WHERE e.id = a.id AND a.unjoined
			RETURNING e.id
		),
		authored_hidden AS (
			UPDATE stored_emails e SET remote_expunge_observed_at = $2, remote_expunge_reason = 'DeletedByMailFathom', updated_at = $2
			FROM authored a WHERE e.id = a.id AND a.mutation = 'Delete'
			  AND ($4 = 'RetainTombstone' OR a.id IN (SELECT id FROM still_shown))
			RETURNING e.id
		),
		authored_erased AS (
			DELETE FROM stored_emails e USING authored a
			WHERE e.id = a.id AND a.mutation = 'Delete' AND $4 = 'EraseLocalCopy'
			  AND a.id NOT IN (SELECT id FROM still_shown)
			RETURNING e.id
		),
		refreshed AS (
			UPDATE stored_emails e SET remote_flags = c.flags, remote_flags_observed_at = $2, updated_at = $2,
			       remote_labels = CASE WHEN c.shared_email_id IS NULL THEN coalesce(c.labels, e.remote_labels) END
			FROM current c WHERE e.id = c.id AND c.kind = 'flags'
			RETURNING e.id
		),
		-- Labels belong to the email: an occurrence that shares one writes
		-- them on its holder (unless the holder is itself in this window).
		holder_labeled AS (
			UPDATE stored_emails h SET remote_labels = l.labels, updated_at = $2
			FROM (SELECT DISTINCT ON (c.shared_email_id) c.shared_email_id AS id, c.labels
			      FROM current c WHERE c.kind = 'flags' AND c.labels IS NOT NULL AND c.shared_email_id IS NOT NULL
			        AND c.shared_email_id NOT IN (SELECT id FROM current)
			      ORDER BY c.shared_email_id) l
			WHERE h.id = l.id
			RETURNING h.id
		),
		confirmed AS (
			UPDATE stored_emails e SET remote_flags_observed_at = $2
			FROM current c WHERE e.id = c.id AND c.kind = 'present'
			RETURNING e.id
		),
		tombstoned AS (
			UPDATE stored_emails e SET remote_expunge_observed_at = $2, updated_at = $2
			FROM current c WHERE e.id = c.id AND c.kind = 'gone'
			  AND ($4 = 'RetainTombstone' OR c.id IN (SELECT id FROM still_shown))
			  AND c.id NOT IN (SELECT id FROM authored)
			RETURNING e.id
		),
		erased AS (
			DELETE FROM stored_emails e USING current c
			WHERE e.id = c.id AND c.kind = 'gone' AND $4 = 'EraseLocalCopy'
			  AND c.id NOT IN (SELECT id FROM authored) AND c.id NOT IN (SELECT id FROM still_shown)
			RETURNING e.id
		),
		erased_emails AS (
			DELETE FROM stored_emails h USING last_shown l WHERE h.id = l.id
			RETURNING h.id
		)
		SELECT (SELECT count(*) FROM refreshed), (SELECT count(*) FROM confirmed),
		       (SELECT count(*) FROM tombstoned), (SELECT count(*) FROM erased),
		       (SELECT count(*) FROM input) - (SELECT count(*) FROM current),
		       (SELECT count(*) FROM authored), (SELECT count(*) FROM relocated_unjoined), (SELECT count(*) FROM seen_authored),
		       (SELECT jsonb_agg(jsonb_build_object('kind', x.mutation, 'mutation', x.mutation_id, 'email', x.id))
		        FROM (SELECT id, mutation_id, mutation FROM authored UNION ALL SELECT * FROM seen_authored) x)`,
		input, time.Now(), w.TakenAt, string(d)).Scan(&r.Refreshed, &r.Confirmed, &r.Tombstoned, &r.Erased, &r.Superseded,
		&r.LeftByMailFathom, &r.RelocatedUnjoined, &r.SeenByMailFathom, &r.Withheld)
	if err != nil {
		return ReconcileResult{}, fmt.Errorf("mailstore: apply the answer: %w", err)
	}
	return r, nil
}

// RecordModSeq records on the folder's checkpoint the modification sequence
// a pass covered the whole folder through: only a pass that asked the whole
// folder what changed may call it (a cycle records its own through
// CompleteReconcileCycle). The sequence belongs to the checkpoint's
// UIDVALIDITY and is never written under another.
func RecordModSeq(ctx context.Context, q Querier, folderID int64, uidValidity uint32, modSeq uint64) error {
	if modSeq == 0 || modSeq > 1<<63-1 {
		return nil
	}
	_, err := q.Exec(ctx, `UPDATE synchronization_checkpoints SET highest_modseq = $3
		WHERE mail_folder_id = $1 AND uid_validity = $2`, folderID, int64(uidValidity), int64(modSeq))
	if err != nil {
		return fmt.Errorf("mailstore: record the modification sequence: %w", err)
	}
	return nil
}
