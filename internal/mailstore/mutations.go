package mailstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// MutationKind is what a mailbox mutation asks for.
type MutationKind string

// The mutations MailFathom can make to a mailbox.
const (
	MutationRelocate   MutationKind = "Relocate"
	MutationCopy       MutationKind = "Copy"
	MutationDelete     MutationKind = "Delete"
	MutationMarkRead   MutationKind = "MarkRead"
	MutationMarkUnread MutationKind = "MarkUnread"
)

// Places reports whether the mutation places the message in another folder
// (and so names a destination).
func (k MutationKind) Places() bool { return k == MutationRelocate || k == MutationCopy }

// Valid reports whether k is one of the known mutations.
func (k MutationKind) Valid() bool {
	switch k {
	case MutationRelocate, MutationCopy, MutationDelete, MutationMarkRead, MutationMarkUnread:
		return true
	}
	return false
}

// MutationState is where a mutation stands as a whole.
type MutationState string

// The states of a mutation. Completed and DeadLettered are final.
const (
	// MutationPending: recorded, no attempt made yet.
	MutationPending MutationState = "Pending"
	// MutationConverging: at least one attempt made, not finished.
	MutationConverging MutationState = "Converging"
	// MutationCompleted: the mailbox is as asked.
	MutationCompleted MutationState = "Completed"
	// MutationDeadLettered: given up on; it stays counted and readable
	// with its failure code.
	MutationDeadLettered MutationState = "DeadLettered"
)

// Final reports whether nothing more is attempted for a mutation in s.
func (s MutationState) Final() bool { return s == MutationCompleted || s == MutationDeadLettered }

// MutationStage is how far the commands of a mutation got.
type MutationStage string

// The stages of a mutation, in the order a relocation without MOVE passes
// them.
const (
	// StageRecorded: nothing issued.
	StageRecorded MutationStage = "Recorded"
	// StagePlacementIssued: COPY or MOVE is about to be, or was, sent and
	// its answer was never read. Never reissued.
	StagePlacementIssued MutationStage = "PlacementIssued"
	// StageCopied: the server confirmed the copy (fallback relocation).
	StageCopied MutationStage = "Copied"
	// StageFlagged: \Deleted landed on the source; only UID EXPUNGE is
	// owed.
	StageFlagged MutationStage = "Flagged"
	// StageCompleted: every command was answered.
	StageCompleted MutationStage = "Completed"
)

// PlacementPath is the sequence that carried a placement. It is recorded
// when the placement is issued, so a resumption follows the sequence that
// ran rather than what the server advertises on the next connection.
type PlacementPath string

// The placement sequences.
const (
	PathMove     PlacementPath = "Move"
	PathFallback PlacementPath = "Fallback"
)

// Mutation is one mailbox_mutations row, with the account key and the
// aliases of the folders it names. It holds no mail.
type Mutation struct {
	ID                  uuid.UUID
	AccountID           int64
	AccountKey          string
	EmailID             uuid.UUID
	SourceFolderID      int64
	SourceAlias         string
	SourceUIDValidity   uint32
	SourceUID           uint32
	Kind                MutationKind
	DestinationFolderID int64  // 0 unless Kind.Places()
	DestinationAlias    string // "" unless Kind.Places()
	RequestID           string
	State               MutationState
	Stage               MutationStage
	Path                PlacementPath // "" until a placement is issued
	Attempts            int
	FailureCode         string // "" for none
	PlacedUIDValidity   uint32 // 0 when the server named no placement
	PlacedUID           uint32
	PlacementIssuedAt   time.Time // zero for none
	PlacementObservedAt time.Time
	SourceLeftAt        time.Time
	CompletedAt         time.Time
	RecordedAt          time.Time
	UpdatedAt           time.Time
}

// MutationRequest asks for one change to one stored email.
type MutationRequest struct {
	EmailID uuid.UUID
	Kind    MutationKind
	// DestinationFolderID is the binding a placement goes to; 0 otherwise.
	DestinationFolderID int64
	// RequestID is the invocation's identity; never blank.
	RequestID string
}

// Unjoined reports that m is a relocation or a copy the server carried
// without naming the placement — it answered with no COPYUID, or a MOVE
// whose answer was never read completed from its source leaving — so no
// discovery is ever joined to it: the destination's copy is stored as any
// other discovery, and a relocation's source is tombstoned once it is seen
// to leave. It is false until the placement is known to have run.
func (m Mutation) Unjoined() bool {
	if !m.Kind.Places() || m.PlacedUID != 0 {
		return false
	}
	switch m.Stage {
	case StageCopied, StageFlagged, StageCompleted:
		return true
	}
	return false
}

// sameChange reports whether m is the change r asks for.
func (m Mutation) sameChange(r MutationRequest) bool {
	return m.EmailID == r.EmailID && m.Kind == r.Kind && m.DestinationFolderID == r.DestinationFolderID
}

// ErrRequestIDReused is a request id already naming another change.
var ErrRequestIDReused = failure.New("MutationRequestIdReused", "mailstore: the request id already names another change")

// ErrEmailNotServed is a mutation asked of an email that is not stored,
// or is tombstoned or out of its binding's served UID space.
var ErrEmailNotServed = failure.New("MutationEmailNotServed", "mailstore: the email is not stored, or no longer served")

// MutableEmail is what a request is checked against: where a served email
// is.
type MutableEmail struct {
	ID          uuid.UUID
	AccountID   int64
	AccountKey  string
	FolderID    int64
	Alias       string
	UIDValidity uint32
	UID         uint32
	Tombstoned  bool
}

// ReadMutableEmail returns where the stored email id is, and false when no
// row has that id. A tombstoned email is returned with Tombstoned set.
func ReadMutableEmail(ctx context.Context, q Querier, id uuid.UUID) (MutableEmail, bool, error) {
	var (
		e       MutableEmail
		uv, uid int64
	)
	err := q.QueryRow(ctx,
		`SELECT e.id, e.mailbox_account_id, a.account_key, e.mail_folder_id, f.alias, e.uid_validity, e.uid,
		        NOT EXISTS (SELECT 1 FROM served_stored_emails s WHERE s.id = e.id)
		 FROM stored_emails e
		 JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		 JOIN mail_folders f ON f.id = e.mail_folder_id
		 WHERE e.id = $1`, id,
	).Scan(&e.ID, &e.AccountID, &e.AccountKey, &e.FolderID, &e.Alias, &uv, &uid, &e.Tombstoned)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return MutableEmail{}, false, nil
	case err != nil:
		return MutableEmail{}, false, fmt.Errorf("mailstore: read stored email %s: %w", id, err)
	}
	e.UIDValidity, e.UID = uint32(uv), uint32(uid)
	return e, true, nil
}

// RecordMutation writes the change r asks for and returns it with true, or
// returns the change r's request id already names with false. It refuses
// with ErrRequestIDReused a request id naming another change, and with
// ErrEmailNotServed an email that is not served. The caller inserts the
// first stage's job in the same transaction when the change is new.
//
// Two callers recording the same change at once both succeed with the same
// row: the unique indexes refuse the second insert, which then reads the
// row the first committed (READ COMMITTED; a stricter transaction gets
// ErrConcurrencyConflict and retries).
func RecordMutation(ctx context.Context, q Querier, r MutationRequest, now time.Time) (Mutation, bool, error) {
	if !r.Kind.Valid() {
		return Mutation{}, false, fmt.Errorf("mailstore: record mutation: unknown mutation %q", r.Kind)
	}
	if strings.TrimSpace(r.RequestID) == "" {
		return Mutation{}, false, errors.New("mailstore: record mutation: the request id is blank")
	}
	if r.Kind.Places() != (r.DestinationFolderID != 0) {
		return Mutation{}, false, errors.New("mailstore: record mutation: a destination goes with a relocation or a copy, and only with those")
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Mutation{}, false, fmt.Errorf("mailstore: record mutation: mint an id: %w", err)
	}
	var dest *int64
	if r.DestinationFolderID != 0 {
		dest = &r.DestinationFolderID
	}
	var inserted uuid.UUID
	err = q.QueryRow(ctx,
		`INSERT INTO mailbox_mutations (id, mailbox_account_id, stored_email_id, source_mail_folder_id,
		        source_uid_validity, source_uid, mutation, destination_mail_folder_id, request_id, recorded_at, updated_at)
		 SELECT $1, e.mailbox_account_id, e.id, e.mail_folder_id, e.uid_validity, e.uid, $3, $4, $5, $6, $6
		 FROM served_stored_emails e WHERE e.id = $2
		 ON CONFLICT DO NOTHING
		 RETURNING id`,
		id, r.EmailID, string(r.Kind), dest, r.RequestID, now,
	).Scan(&inserted)
	switch {
	case err == nil:
		m, _, err := ReadMutation(ctx, q, inserted)
		return m, true, err
	case !errors.Is(err, pgx.ErrNoRows):
		return Mutation{}, false, fmt.Errorf("mailstore: record mutation: %w", err)
	}
	existing, found, err := readMutationWhere(ctx, q, `m.request_id = $1`, r.RequestID)
	if err != nil {
		return Mutation{}, false, err
	}
	if !found {
		if _, served, err := servedEmail(ctx, q, r.EmailID); err != nil {
			return Mutation{}, false, err
		} else if !served {
			return Mutation{}, false, ErrEmailNotServed
		}
		return Mutation{}, false, conflict("the mutation another caller recorded is not visible to this transaction")
	}
	if !existing.sameChange(r) {
		return Mutation{}, false, ErrRequestIDReused
	}
	return existing, false, nil
}

func servedEmail(ctx context.Context, q Querier, id uuid.UUID) (uuid.UUID, bool, error) {
	var got uuid.UUID
	err := q.QueryRow(ctx, `SELECT id FROM served_stored_emails WHERE id = $1`, id).Scan(&got)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return uuid.UUID{}, false, nil
	case err != nil:
		return uuid.UUID{}, false, fmt.Errorf("mailstore: read stored email %s: %w", id, err)
	}
	return got, true, nil
}

const mutationColumns = `m.id, m.mailbox_account_id, a.account_key, m.stored_email_id, m.source_mail_folder_id, sf.alias,
	m.source_uid_validity, m.source_uid, m.mutation, coalesce(m.destination_mail_folder_id, 0), coalesce(df.alias, ''),
	coalesce(m.request_id, ''), m.state, m.stage, coalesce(m.placement_path, ''), m.attempts, coalesce(m.failure_code, ''),
	coalesce(m.placed_uid_validity, 0), coalesce(m.placed_uid, 0), m.placement_issued_at, m.placement_observed_at,
	m.source_left_observed_at, m.completed_at, m.recorded_at, m.updated_at`

const mutationFrom = ` FROM mailbox_mutations m
	JOIN mailbox_accounts a ON a.id = m.mailbox_account_id
	JOIN mail_folders sf ON sf.id = m.source_mail_folder_id
	LEFT JOIN mail_folders df ON df.id = m.destination_mail_folder_id`

func scanMutation(row pgx.Row) (Mutation, error) {
	var (
		m                                    Mutation
		suv, suid, puv, puid                 int64
		issued, observed, left, completed    *time.Time
		kind, state, stage, path, failureStr string
	)
	err := row.Scan(&m.ID, &m.AccountID, &m.AccountKey, &m.EmailID, &m.SourceFolderID, &m.SourceAlias,
		&suv, &suid, &kind, &m.DestinationFolderID, &m.DestinationAlias,
		&m.RequestID, &state, &stage, &path, &m.Attempts, &failureStr,
		&puv, &puid, &issued, &observed, &left, &completed, &m.RecordedAt, &m.UpdatedAt)
	if err != nil {
		return Mutation{}, err
	}
	m.SourceUIDValidity, m.SourceUID = uint32(suv), uint32(suid)
	m.PlacedUIDValidity, m.PlacedUID = uint32(puv), uint32(puid)
	m.Kind, m.State, m.Stage, m.Path, m.FailureCode = MutationKind(kind), MutationState(state), MutationStage(stage), PlacementPath(path), failureStr
	for _, p := range []struct {
		from *time.Time
		to   *time.Time
	}{{issued, &m.PlacementIssuedAt}, {observed, &m.PlacementObservedAt}, {left, &m.SourceLeftAt}, {completed, &m.CompletedAt}} {
		if p.from != nil {
			*p.to = *p.from
		}
	}
	return m, nil
}

func readMutationWhere(ctx context.Context, q Querier, where string, args ...any) (Mutation, bool, error) {
	m, err := scanMutation(q.QueryRow(ctx, `SELECT `+mutationColumns+mutationFrom+` WHERE `+where, args...))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Mutation{}, false, nil
	case err != nil:
		return Mutation{}, false, fmt.Errorf("mailstore: read mutation: %w", err)
	}
	return m, true, nil
}

// ReadMutation returns the mutation id, and false when there is none
// (never recorded, or removed with its email).
func ReadMutation(ctx context.Context, q Querier, id uuid.UUID) (Mutation, bool, error) {
	return readMutationWhere(ctx, q, `m.id = $1`, id)
}

// ReadMutationByRequest returns the mutation requestID names, and false
// when none does.
func ReadMutationByRequest(ctx context.Context, q Querier, requestID string) (Mutation, bool, error) {
	return readMutationWhere(ctx, q, `m.request_id = $1`, requestID)
}

// MutationFilter narrows ListMutations. Zero values do not narrow.
type MutationFilter struct {
	AccountKey string
	State      MutationState
	Limit      int // at most this many, newest first; 100 when 0
}

// ListMutations returns mutations newest first.
func ListMutations(ctx context.Context, q Querier, f MutationFilter) ([]Mutation, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := q.Query(ctx, `SELECT `+mutationColumns+mutationFrom+`
		WHERE ($1 = '' OR a.account_key = $1) AND ($2 = '' OR m.state = $2)
		ORDER BY m.recorded_at DESC, m.id DESC LIMIT $3`, f.AccountKey, string(f.State), limit)
	if err != nil {
		return nil, fmt.Errorf("mailstore: list mutations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Mutation, error) { return scanMutation(r) })
	if err != nil {
		return nil, fmt.Errorf("mailstore: list mutations: %w", err)
	}
	return out, nil
}

// UnfinishedMutations returns the ids of the account's unfinished
// mutations, oldest first, at most limit of them.
func UnfinishedMutations(ctx context.Context, q Querier, accountKey string, limit int) ([]uuid.UUID, error) {
	rows, err := q.Query(ctx,
		`SELECT m.id FROM mailbox_mutations m JOIN mailbox_accounts a ON a.id = m.mailbox_account_id
		 WHERE a.account_key = $1 AND m.state IN ('Pending', 'Converging')
		 ORDER BY m.recorded_at, m.id LIMIT $2`, accountKey, limit)
	if err != nil {
		return nil, fmt.Errorf("mailstore: unfinished mutations: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("mailstore: unfinished mutations: %w", err)
	}
	return ids, nil
}

// MutationAttempt is what BeginMutationAttempt decided.
type MutationAttempt int

// What BeginMutationAttempt decided.
const (
	// AttemptGo: an attempt was counted; make it.
	AttemptGo MutationAttempt = iota
	// AttemptFinal: the mutation is already completed or dead-lettered.
	AttemptFinal
	// AttemptExhausted: MaxMutationAttempts are spent; the mutation is
	// now dead-lettered.
	AttemptExhausted
)

// BeginMutationAttempt counts one attempt before it is made, so an attempt
// that kills the process still counts: it locks the row, refuses a final
// mutation, dead-letters one whose maxAttempts are spent (with
// exhaustedCode), and otherwise increments attempts and marks it
// Converging. It returns the row as it is afterwards.
func BeginMutationAttempt(ctx context.Context, tx pgx.Tx, id uuid.UUID, maxAttempts int, exhaustedCode string, now time.Time) (Mutation, MutationAttempt, error) {
	var state string
	var attempts int
	err := tx.QueryRow(ctx, `SELECT state, attempts FROM mailbox_mutations WHERE id = $1 FOR UPDATE`, id).Scan(&state, &attempts)
	if err != nil {
		return Mutation{}, AttemptFinal, fmt.Errorf("mailstore: begin mutation attempt: %w", err)
	}
	decision := AttemptGo
	switch {
	case MutationState(state).Final():
		decision = AttemptFinal
	case attempts >= maxAttempts:
		decision = AttemptExhausted
		if err := FinishMutation(ctx, tx, id, MutationDeadLettered, exhaustedCode, now); err != nil {
			return Mutation{}, decision, err
		}
	default:
		if _, err := tx.Exec(ctx,
			`UPDATE mailbox_mutations SET attempts = attempts + 1, state = 'Converging', updated_at = $2 WHERE id = $1`,
			id, now); err != nil {
			return Mutation{}, decision, fmt.Errorf("mailstore: begin mutation attempt: %w", err)
		}
	}
	m, _, err := ReadMutation(ctx, tx, id)
	return m, decision, err
}

// MutationAdvance is the next stage of a mutation and what the command
// that reached it answered.
type MutationAdvance struct {
	Stage MutationStage
	// Path is recorded with StagePlacementIssued.
	Path PlacementPath
	// PlacedUIDValidity and PlacedUID are the COPYUID answer, when one
	// came (0 otherwise).
	PlacedUIDValidity uint32
	PlacedUID         uint32
}

// AdvanceMutation moves mutation id from stage from to a.Stage, and to
// Completed when a.Stage is StageCompleted. It returns
// ErrConcurrencyConflict when the row is no longer at stage from (another
// worker advanced it). The caller inserts the next stage's job in the same
// transaction.
func AdvanceMutation(ctx context.Context, tx pgx.Tx, id uuid.UUID, from MutationStage, a MutationAdvance, now time.Time) error {
	var path *string
	if a.Path != "" {
		p := string(a.Path)
		path = &p
	}
	var puv, puid *int64
	if a.PlacedUID != 0 && a.PlacedUIDValidity != 0 {
		v, u := int64(a.PlacedUIDValidity), int64(a.PlacedUID)
		puv, puid = &v, &u
	}
	tag, err := tx.Exec(ctx,
		`UPDATE mailbox_mutations SET
		   stage = $3,
		   placement_path = coalesce($4, placement_path),
		   placement_issued_at = CASE WHEN $3 = 'PlacementIssued' THEN $7 ELSE placement_issued_at END,
		   placed_uid_validity = coalesce($5, placed_uid_validity),
		   placed_uid = coalesce($6, placed_uid),
		   state = CASE WHEN $3 = 'Completed' THEN 'Completed' ELSE state END,
		   completed_at = CASE WHEN $3 = 'Completed' THEN $7 ELSE completed_at END,
		   failure_code = CASE WHEN $3 = 'Completed' THEN NULL ELSE failure_code END,
		   updated_at = $7
		 WHERE id = $1 AND stage = $2 AND state IN ('Pending', 'Converging')`,
		id, string(from), string(a.Stage), path, puv, puid, now)
	if err != nil {
		return fmt.Errorf("mailstore: advance mutation: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return conflict("the mutation is no longer at the stage this worker read")
	}
	return nil
}

// FailMutation records the failure code of an attempt that did not finish;
// the mutation stays unfinished for the next attempt.
func FailMutation(ctx context.Context, q Querier, id uuid.UUID, code string, now time.Time) error {
	if _, err := q.Exec(ctx,
		`UPDATE mailbox_mutations SET failure_code = $2, updated_at = $3
		 WHERE id = $1 AND state IN ('Pending', 'Converging')`, id, code, now); err != nil {
		return fmt.Errorf("mailstore: record mutation failure: %w", err)
	}
	return nil
}

// FinishMutation puts an unfinished mutation in a final state: completed
// or dead-lettered with its failure code (code "" keeps the code the last
// failed attempt recorded). Completing clears the failure code: a change
// that ended as asked is not stuck, whatever its earlier attempts met. A
// mutation already final is left as it is.
func FinishMutation(ctx context.Context, q Querier, id uuid.UUID, state MutationState, code string, now time.Time) error {
	if !state.Final() {
		return fmt.Errorf("mailstore: finish mutation: %s is not a final state", state)
	}
	var c *string
	if code != "" {
		c = &code
	}
	if _, err := q.Exec(ctx,
		`UPDATE mailbox_mutations SET state = $2, updated_at = $4,
		        failure_code = CASE WHEN $2 = 'Completed' THEN NULL ELSE coalesce($3, failure_code) END,
		        completed_at = CASE WHEN $2 = 'Completed' THEN $4 ELSE completed_at END,
		        stage = CASE WHEN $2 = 'Completed' THEN 'Completed' ELSE stage END
		 WHERE id = $1 AND state IN ('Pending', 'Converging')`, id, string(state), c, now); err != nil {
		return fmt.Errorf("mailstore: finish mutation: %w", err)
	}
	return nil
}

// OutstandingMutations is one (account, kind, state) group of mutations
// that are not completed: how many, and when the oldest was recorded.
type OutstandingMutations struct {
	AccountKey string
	Kind       MutationKind
	State      MutationState
	Count      int64
	Oldest     time.Time
}

// CountOutstandingMutations groups the mutations that are pending,
// converging or dead-lettered by account, kind and state. It reads
// ix_mailbox_mutations_outstanding, never the completed changes.
func CountOutstandingMutations(ctx context.Context, q Querier) ([]OutstandingMutations, error) {
	rows, err := q.Query(ctx,
		`SELECT a.account_key, m.mutation, m.state, count(*), min(m.recorded_at)
		 FROM mailbox_mutations m JOIN mailbox_accounts a ON a.id = m.mailbox_account_id
		 WHERE m.state <> 'Completed'
		 GROUP BY a.account_key, m.mutation, m.state ORDER BY a.account_key, m.mutation, m.state`)
	if err != nil {
		return nil, fmt.Errorf("mailstore: count outstanding mutations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutstandingMutations, error) {
		var o OutstandingMutations
		var kind, state string
		err := r.Scan(&o.AccountKey, &kind, &state, &o.Count, &o.Oldest)
		o.Kind, o.State = MutationKind(kind), MutationState(state)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: count outstanding mutations: %w", err)
	}
	return out, nil
}

// FolderMutations is how many of an account's mutations whose source is
// one folder alias stand in one state that is not Completed.
type FolderMutations struct {
	AccountKey string
	Alias      string
	State      MutationState
	Count      int64
}

// OutstandingMutationsByFolder counts the mutations that are pending,
// converging or dead-lettered by account, source folder alias (across the
// alias's bindings) and state. It reads ix_mailbox_mutations_outstanding,
// never the completed changes.
func OutstandingMutationsByFolder(ctx context.Context, q Querier) ([]FolderMutations, error) {
	rows, err := q.Query(ctx, `
		SELECT a.account_key, f.alias, m.state, count(*)
		FROM mailbox_mutations m
		JOIN mail_folders f ON f.id = m.source_mail_folder_id
		JOIN mailbox_accounts a ON a.id = m.mailbox_account_id
		WHERE m.state <> 'Completed'
		GROUP BY a.account_key, f.alias, m.state
		ORDER BY a.account_key, f.alias, m.state`)
	if err != nil {
		return nil, fmt.Errorf("mailstore: count outstanding mutations by folder: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FolderMutations, error) {
		var m FolderMutations
		var state string
		err := r.Scan(&m.AccountKey, &m.Alias, &state, &m.Count)
		m.State = MutationState(state)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: count outstanding mutations by folder: %w", err)
	}
	return out, nil
}

// UnjoinedPlacements counts, by account and source folder alias (across
// the alias's bindings), the completed relocations and copies whose
// placement the server never named (Mutation.Unjoined): "completed,
// unjoined". It reads ix_mailbox_mutations_unjoined, never the rest of
// the completed changes.
func UnjoinedPlacements(ctx context.Context, q Querier) ([]FolderMutations, error) {
	rows, err := q.Query(ctx, `
		SELECT a.account_key, f.alias, count(*)
		FROM mailbox_mutations m
		JOIN mail_folders f ON f.id = m.source_mail_folder_id
		JOIN mailbox_accounts a ON a.id = m.mailbox_account_id
		WHERE m.state = 'Completed' AND m.placed_uid IS NULL AND m.mutation IN ('Relocate', 'Copy')
		GROUP BY a.account_key, f.alias
		ORDER BY a.account_key, f.alias`)
	if err != nil {
		return nil, fmt.Errorf("mailstore: count unjoined placements: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FolderMutations, error) {
		m := FolderMutations{State: MutationCompleted}
		err := r.Scan(&m.AccountKey, &m.Alias, &m.Count)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: count unjoined placements: %w", err)
	}
	return out, nil
}

// FailedMutation is the identity of an account's latest failed mutation:
// no mail, only its id, kind, state, failure code and when it failed.
type FailedMutation struct {
	AccountKey  string
	ID          uuid.UUID
	Kind        MutationKind
	State       MutationState
	FailureCode string
	At          time.Time
}

// LastFailedMutations returns, per account, the outstanding mutation that
// most recently recorded a failure code: a dead-lettered one, or one still
// pending or converging whose last attempt failed. A completed mutation
// has no failure, so the read stays on ix_mailbox_mutations_outstanding.
func LastFailedMutations(ctx context.Context, q Querier) ([]FailedMutation, error) {
	rows, err := q.Query(ctx, `
		SELECT DISTINCT ON (m.mailbox_account_id) a.account_key, m.id, m.mutation, m.state, m.failure_code, m.updated_at
		FROM mailbox_mutations m
		JOIN mailbox_accounts a ON a.id = m.mailbox_account_id
		WHERE m.state <> 'Completed' AND m.failure_code IS NOT NULL
		ORDER BY m.mailbox_account_id, m.updated_at DESC, m.id`)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the last failed mutations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FailedMutation, error) {
		var m FailedMutation
		var kind, state string
		err := r.Scan(&m.AccountKey, &m.ID, &kind, &state, &m.FailureCode, &m.At)
		m.Kind, m.State = MutationKind(kind), MutationState(state)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the last failed mutations: %w", err)
	}
	return out, nil
}

// ReadBindingByID returns the binding id, and false when there is none.
func ReadBindingByID(ctx context.Context, q Querier, id int64) (Binding, bool, error) {
	b, err := scanBinding(q.QueryRow(ctx, `SELECT `+bindingColumns+` FROM mail_folders WHERE id = $1`, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Binding{}, false, nil
	case err != nil:
		return Binding{}, false, fmt.Errorf("mailstore: read binding %d: %w", id, err)
	}
	return b, true, nil
}

// HideDeletedEmail applies a completed delete of MailFathom's own to the
// local copy at once: under RetainTombstone the email is tombstoned with
// the reason DeletedByMailFathom (every query excludes it from now), under
// EraseLocalCopy it is removed, and its
// content, search document and mutation records with it. A tombstone
// already recorded keeps its time.
func HideDeletedEmail(ctx context.Context, q Querier, id uuid.UUID, d Disposition, now time.Time) error {
	var err error
	switch d {
	case EraseLocalCopy:
		_, err = q.Exec(ctx, `DELETE FROM stored_emails WHERE id = $1`, id)
	case RetainTombstone:
		_, err = q.Exec(ctx,
			`UPDATE stored_emails SET remote_expunge_observed_at = $2, remote_expunge_reason = 'DeletedByMailFathom', updated_at = $2
			 WHERE id = $1 AND remote_expunge_observed_at IS NULL`, id, now)
	default:
		return fmt.Errorf("mailstore: hide deleted email: unknown disposition %q", d)
	}
	if err != nil {
		return fmt.Errorf("mailstore: hide deleted email: %w", err)
	}
	return nil
}

// PlacementJoin is one discovered occurrence a relocation or copy of
// MailFathom's own placed, joined by the COPYUID the server answered.
type PlacementJoin struct {
	MutationID uuid.UUID
	Kind       MutationKind
	EmailID    uuid.UUID
	UID        uint32
}

// JoinPlacements joins the discovered uids of a folder's UID space to the
// relocations and copies whose COPYUID named them and that no discovery
// answered yet. A relocation carries its stored email onto the new
// occurrence — the same row, so its content, search document and
// passages stay keyed by the same id; nothing is fetched — with its
// flags unobserved, so the folder's own window says what holds there now.
// A copy is only marked observed: the caller stores it as any other
// discovery. An occurrence already stored under the placed UID is joined
// to nothing. Each placement is joined once.
func JoinPlacements(ctx context.Context, tx pgx.Tx, folderID int64, uidValidity uint32, uids []uint32, now time.Time) ([]PlacementJoin, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	wanted := make([]int64, len(uids))
	for i, u := range uids {
		wanted[i] = int64(u)
	}
	rows, err := tx.Query(ctx, `
		WITH m AS (
			SELECT m.id, m.mutation, m.stored_email_id, m.placed_uid
			FROM mailbox_mutations m
			WHERE m.destination_mail_folder_id = $1 AND m.placed_uid_validity = $2 AND m.placed_uid = ANY($3)
			  AND m.placement_observed_at IS NULL
			  AND NOT EXISTS (SELECT 1 FROM stored_emails s
			                  WHERE s.mail_folder_id = $1 AND s.uid_validity = $2 AND s.uid = m.placed_uid)
			FOR UPDATE OF m
		),
		carried AS (
			UPDATE stored_emails e SET mail_folder_id = $1, uid_validity = $2, uid = m.placed_uid,
			       remote_flags = '{}', remote_flags_observed_at = NULL, updated_at = $4
			FROM m WHERE e.id = m.stored_email_id AND m.mutation = 'Relocate'
			RETURNING e.id
		),
		marked AS (
			UPDATE mailbox_mutations x SET placement_observed_at = $4, updated_at = $4
			FROM m WHERE x.id = m.id
			RETURNING x.id
		)
		SELECT m.id, m.mutation, m.stored_email_id, m.placed_uid FROM m ORDER BY m.placed_uid`,
		folderID, int64(uidValidity), wanted, now)
	if err != nil {
		return nil, fmt.Errorf("mailstore: join placements: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PlacementJoin, error) {
		var (
			j    PlacementJoin
			kind string
			uid  int64
		)
		err := r.Scan(&j.MutationID, &kind, &j.EmailID, &uid)
		j.Kind, j.UID = MutationKind(kind), uint32(uid)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: join placements: %w", err)
	}
	return out, nil
}
