// Package forwardpass runs the forward pass over one alias binding: it
// walks new mail above the folder's checkpoint in bounded batches, stores
// each occurrence's metadata and raw MIME idempotently, and advances the
// checkpoint only to a UID the server's state proves safe.
//
// Each stored payload is read for its metadata and search document on the
// spot (searchindex.Extract), so enrichment costs no second fetch and no
// second read of the database; an oversized message gets a document from
// its envelope subject.
//
// It reads the mailbox through a read-only session (EXAMINE and BODY.PEEK
// only; see imapx) and keeps what it holds in memory bounded: each body is
// written into an open transaction as soon as it is read, and kept only
// until its write group commits (Options.GroupMessages, GroupBytes);
// transactions are committed in groups so a folder of small messages does
// not pay one fsync per message. While a batch commits, the next batch's
// first messages are read ahead (Options.ReadAheadBytes), so a long link
// does not idle at every batch. A crash between commits loses only
// uncommitted writes, which the next pass fetches again; every write is an
// upsert on the occurrence identity, so nothing is doubled.
//
// The flags each metadata FETCH returns are stored as an observation made
// when it was sent, so stored mail is as current in the reconciliation
// queue as a window's answer would make it. Where the server reports
// modification sequences, a pass that walks a UID space from its start (a
// folder's first synchronization, or a recreated folder's) begins a
// reconciliation cycle with the HIGHESTMODSEQ of its EXAMINE, and the pass
// that walks that space to its end completes it when every stored
// occurrence was observed since, as a window would: the first
// synchronization is the folder's first cycle, and the window that follows
// it asks the whole folder only what changed since that EXAMINE. A pass
// that ends earlier records no sequence.
//
// It is the mirror of package backwardpass, which asks the server about
// mail already stored.
package forwardpass

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/mimex"
)

// Session is the part of a read-only IMAP session the forward pass uses.
// *mailsession.Session implements it: each call runs under the account's
// resilience pipelines, which re-establish a failed session read-only
// between attempts, so the pass itself repeats nothing. A session that
// comes back with another UIDVALIDITY refuses to read
// (imapx.ErrMailboxFolderRecreated), and the pass ends with that failure.
type Session interface {
	Examine(ctx context.Context, path string) (imapx.FolderState, error)
	SearchUIDs(ctx context.Context, after uint32, since time.Time) ([]uint32, error)
	FetchMetadata(ctx context.Context, uids []uint32) ([]imapx.MessageMetadata, error)
	FetchBodies(ctx context.Context, uids []uint32, maxBytes int64, fn func(imapx.Body) error) error
	ExistingUIDs(ctx context.Context, uids []uint32) ([]uint32, error)
	// ReconcileMode is the question a reconciliation window asks the
	// server: the pass takes the HIGHESTMODSEQ its EXAMINE reports as a
	// reconciliation cycle's sequence only where it is not imapx.Plain, as
	// a server may report one it does not advertise CONDSTORE for.
	ReconcileMode() imapx.ReconcileMode
	// IdentityScheme and FetchIdentities are how the server names a
	// message across folders (X-GM-MSGID, EMAILID): a message whose
	// identity is already stored is recorded as an occurrence of that
	// email, and its content is not fetched again.
	IdentityScheme() imapx.IdentityScheme
	FetchIdentities(ctx context.Context, uids []uint32) (map[uint32]imapx.MessageIdentity, error)
}

// MaxWithheldPasses is how many passes a message the server lists but
// whose content it withholds may stop its folder's checkpoint before it is
// recorded as mailstore.ContentWithheld and stepped over: enough to ride
// out a server that is briefly inconsistent, few enough that one message
// cannot stop a folder for long.
const MaxWithheldPasses = 3

// ContentWithheldError reports that the server listed messages the pass
// asked for but withheld their content — no answer for them, or BODY[]
// answered with NIL — and still lists them. The checkpoint stops before
// the first of them; the pass is worth attempting again later, and after
// MaxWithheldPasses passes such a message is recorded as ContentWithheld.
type ContentWithheldError struct {
	// Count is how many messages were withheld and not yet recorded.
	Count int
}

func (e *ContentWithheldError) Error() string {
	return failure.Text(fmt.Sprintf("forwardpass: the server withheld the content of %d message(s) it still lists; the checkpoint stops before them", e.Count), e.Identity())
}

// Identity implements failure.Named.
func (e *ContentWithheldError) Identity() string { return "MailboxContentWithheld" }

// RetryLater declares the pass worth attempting again on the run backoff.
func (e *ContentWithheldError) RetryLater() bool { return true }

// DB is where the pass writes: a connection the caller holds for the pass.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	mailstore.Querier
}

// Options configure one pass: its bounds, and the hooks and second
// connection through which the caller takes part in its transactions. A
// zero field takes the default its comment names; Run fills the defaults
// and validates once.
type Options struct {
	// BatchSize is MaxMetadataBatchSize: UIDs per metadata batch.
	// Required.
	BatchSize int
	// BatchesPerRun is MaxMetadataBatchesPerRun. Required.
	BatchesPerRun int
	// MaxRawMimeBytes is the largest message whose content is stored.
	// Required.
	MaxRawMimeBytes int64
	// EarliestDate, when non-zero, becomes the UID SEARCH's SINCE key.
	// Default: zero, no SINCE key.
	EarliestDate time.Time
	// GroupMessages and GroupBytes decide when an open write transaction is
	// committed: after this many messages or bytes, whichever comes first,
	// and always at the end of a batch. Defaults: 64 messages, 16 MiB.
	GroupMessages int
	GroupBytes    int64
	// Stopping, when closed, ends the pass before its next batch: the batch
	// in flight commits with its checkpoint and the pass reports More, as
	// at its batch bound. Default: never closed.
	Stopping <-chan struct{}
	// CommitAttempts is MaximumConcurrencyCommitAttempts: how often a write
	// group another transaction got in the way of is written in all, in
	// fresh transactions and without fetching again, before the pass is
	// deferred. Default 1.
	CommitAttempts int
	// FetchChunkBytes bounds the declared size of the messages one body
	// FETCH asks for, so one call — one resilience attempt — covers a
	// bounded amount of data however large the batch's messages are.
	// Default 32 MiB.
	FetchChunkBytes int64
	// ReadAheadBytes bounds the content read from the server and not yet
	// written: the session reads a batch's messages on a goroutine of its
	// own, ahead of the writes, and while a batch commits it already reads
	// the next batch, so the link to the server carries mail while the
	// database writes. A message larger than the bound is read alone.
	// Default 8 MiB.
	ReadAheadBytes int64
	// Extraction bounds the MIME reader that derives each stored message's
	// metadata and search document from the payload just fetched. Default:
	// zero, mimex's defaults for every field.
	Extraction mimex.Limits
	// SecondWriter, when set, is a second connection the pass writes
	// through beside its own, so two PostgreSQL backends store messages at
	// once; storing a message costs PostgreSQL far more CPU than reading it.
	// The caller owns it. Default: nil, the pass writes through its own
	// connection alone.
	SecondWriter DB
	// AfterFinalCheckpoint, when set, runs in the same transaction as the
	// pass's final checkpoint write (the one a pass that leaves no work
	// behind always makes), which is where the reconciliation window that
	// follows every pass is scheduled. Default: nil, nothing runs.
	AfterFinalCheckpoint func(ctx context.Context, tx pgx.Tx) error
	// MaxDownloadBytes, when positive, bounds the message content the pass
	// downloads, by the sizes the server declares (RFC822.SIZE): a message
	// the rest cannot hold is not asked for, and the pass ends before it
	// with its checkpoint committed below it, reporting BudgetReached and
	// the message's size (NextMessageBytes). Nothing after it is asked for
	// either, so what the pass leaves is one range above its checkpoint,
	// and a later pass fetches none of what this one stored. Default 0:
	// unbounded.
	MaxDownloadBytes int64
	// Offer, when set, runs in each of a write group's transactions (one
	// per writer connection) with the ids of the messages that transaction
	// stored, after every write of the group was answered and before the
	// commit: it is where the group offers them for embedding, durable with
	// exactly the rows it names. It must not wait on anything slower than the database —
	// no provider call — and whatever it decides (accept or refuse) must
	// not change what the pass stores or reports. When a group is written
	// again after a conflict, Offer runs again in the new transactions
	// with the same ids. Default: no offer.
	Offer func(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error
}

// Report is what a pass did, in counts: no mail content.
type Report struct {
	Stored         int `json:"stored"`
	Unreadable     int `json:"unreadable"`
	Oversized      int `json:"oversized"`
	ExcludedByDate int `json:"excluded_by_date"`
	Vanished       int `json:"vanished"`
	// ExpungedBeforeFetch counts messages whose body was asked for but
	// that had left the folder by then (an identifier-only search said so).
	ExpungedBeforeFetch int `json:"expunged_before_fetch"`
	// Withheld counts messages recorded as ContentWithheld.
	Withheld int   `json:"content_withheld"`
	Batches  int   `json:"batches"`
	Bytes    int64 `json:"bytes"`
	// Recoveries is how often the session was re-established during the
	// pass; the pass does not recover sessions itself, so the caller fills
	// it in from its session (mailsession.Session.Recoveries).
	Recoveries    int           `json:"recoveries"`
	Duration      time.Duration `json:"duration_ns"`
	UIDValidity   uint32        `json:"uid_validity"`
	CheckpointUID uint32        `json:"checkpoint_uid"`
	// ProgressReset reports that the folder's UIDVALIDITY differed from its
	// checkpoint, so the pass started the folder over.
	ProgressReset bool `json:"progress_reset,omitempty"`
	// Scope reports that this pass walked a new UID space to its end and
	// made it the one served, and how many occurrences of the old one are
	// kept but no longer served.
	Scope mailstore.ScopeChange `json:"scope,omitzero"`
	// Cycle is what the pass did to the folder's reconciliation cycle:
	// "started" (it walks a UID space from its start on a server that
	// reports modification sequences), "completed" (it walked the UID
	// space to its end and every stored occurrence was observed since the
	// cycle began), both, "forgotten" (the server reported no usable
	// sequence for the folder), or empty.
	Cycle string `json:"cycle,omitempty"`
	// More reports that work remains beyond this pass's batch bound, or
	// its download bound.
	More bool `json:"more"`
	// BudgetReached reports that the pass ended at Options.MaxDownloadBytes,
	// before a message of NextMessageBytes (its declared size).
	BudgetReached    bool  `json:"download_budget_reached,omitempty"`
	NextMessageBytes int64 `json:"next_message_bytes,omitempty"`
	// RequestedBytes is the declared size of all the content the pass
	// asked the server for, what was read ahead and dropped included:
	// what a provider's download limit counts.
	RequestedBytes int64 `json:"requested_bytes"`
	// Shared counts the occurrences recorded as another occurrence of an
	// email already stored, by the server's identity of the message
	// (X-GM-MSGID, EMAILID): nothing of their content was fetched.
	Shared int `json:"shared,omitempty"`
	// CarriedByMailFathom counts discoveries a relocation of MailFathom's
	// own placed: the existing stored email was carried onto them, with no
	// fetch and no new row. CopiedByMailFathom counts the copies it
	// placed, stored as discoveries whose provenance is settled. Both are
	// changes withheld from everything that reacts to new mail.
	CarriedByMailFathom int `json:"carried_by_mailfathom"`
	CopiedByMailFathom  int `json:"copied_by_mailfathom"`
	// Observed is the folder as the pass's EXAMINE found it, zero when it
	// failed. It is no part of the job's output, since it names the
	// remote path; the caller records it once the pass completes.
	Observed imapx.FolderState `json:"-"`
}

// WithheldChanges is the number of discoveries the pass recognized as changes of
// MailFathom's own.
func (r Report) WithheldChanges() int { return r.CarriedByMailFathom + r.CopiedByMailFathom }

// withDefaults returns opts with every zero default filled, or an error
// naming what is missing.
func (opts Options) withDefaults() (Options, error) {
	opts.GroupMessages = cmp.Or(opts.GroupMessages, 64)
	opts.GroupBytes = cmp.Or(opts.GroupBytes, 16<<20)
	opts.FetchChunkBytes = cmp.Or(opts.FetchChunkBytes, 32<<20)
	opts.ReadAheadBytes = cmp.Or(opts.ReadAheadBytes, 8<<20)
	if opts.BatchSize < 1 || opts.BatchesPerRun < 1 || opts.MaxRawMimeBytes < 1 {
		return opts, errors.New("forwardpass: limits must be positive")
	}
	return opts, nil
}

// Run runs one pass over binding. It returns the report of what it
// committed even when it fails part-way.
func Run(ctx context.Context, db DB, sess Session, binding mailstore.Binding, opts Options, logger *slog.Logger) (rep Report, err error) {
	start := time.Now()
	defer func() { rep.Duration = time.Since(start) }()
	opts, err = opts.withDefaults()
	if err != nil {
		return rep, err
	}

	cp, hasCP, err := mailstore.ReadCheckpoint(ctx, db, binding.ID)
	if err != nil {
		return rep, err
	}
	state, err := sess.Examine(ctx, binding.RemotePath)
	if err != nil {
		return rep, err
	}
	// The server had reached state.HighestModSeq by now, and every fetch
	// of this pass is sent after it.
	examined := time.Now()
	rep.UIDValidity = state.UIDValidity
	rep.Observed = state

	p := pass{db: db, sess: sess, binding: binding, opts: opts, logger: logger, state: state, rep: &rep, allowance: opts.MaxDownloadBytes}
	if hasCP {
		p.expected = &cp
		p.after = cp.LastSeenUID
		if cp.UIDValidity != state.UIDValidity {
			// Another UID space: never mix it with the checkpoint's.
			p.after = 0
			rep.ProgressReset = true
			logger.WarnContext(ctx, "folder UIDVALIDITY changed; its progress starts over")
			// The new space is stored as one of its own, also where the
			// server names its messages as it named the old ones.
			if _, err := mailstore.ReleaseServerIdentities(ctx, db, binding.ID, state.UIDValidity); err != nil {
				return rep, err
			}
		}
	}
	// A window asks a server that advertises no CONDSTORE without
	// sequences, so a HIGHESTMODSEQ it reports anyway begins no cycle.
	modSeq := state.HighestModSeq
	if sess.ReconcileMode() == imapx.Plain {
		modSeq = 0
	}
	p.cycle = planCycle(p.expected, state.UIDValidity, modSeq, p.after, examined)
	rep.CheckpointUID = p.after
	return rep, p.run(ctx)
}

// cyclePlan is what a pass does to the folder's reconciliation cycle
// (package mailstore, reconciliation_cycle.go): forget and start take
// effect with the pass's first checkpoint write, complete with its final
// one.
type cyclePlan struct {
	// forget drops the cycle in progress: the server reports no usable
	// sequence for the folder (it lost CONDSTORE, or the folder reports
	// NOMODSEQ), or one below the cycle's. A recorded sequence without a
	// cycle is left to the window that follows, which narrows by it and
	// forgets it by the same rule.
	forget bool
	// start, when set, is the cycle the pass begins: it walks the UID space
	// from its start, so every occurrence it stores is observed after its
	// EXAMINE, and no sequence is recorded in that space.
	start *mailstore.ReconcileCycle
	// complete lets the final write complete the cycle in progress (or
	// the one the pass begins): the server reports a sequence, at or above
	// the cycle's.
	complete bool
}

// planCycle decides the pass's cyclePlan from the checkpoint it read
// (expected, nil for none), the UIDVALIDITY and the HIGHESTMODSEQ (0 for
// none) of its EXAMINE, the UID it walks from and when the EXAMINE
// answered. It applies a reconciliation window's rules to the same answer,
// except that only a pass walking a UID space from its start begins a
// cycle: one that starts above a checkpoint leaves that to the window that
// follows it, since mail it did not read may predate any cycle.
func planCycle(expected *mailstore.Checkpoint, uidValidity uint32, modSeq uint64, after uint32, examined time.Time) cyclePlan {
	var plan cyclePlan
	sameScope := expected != nil && expected.UIDValidity == uidValidity
	inCycle := sameScope && expected.Cycle != nil
	usable := modSeq > 0 && modSeq <= math.MaxInt64
	if inCycle && (!usable || modSeq < expected.Cycle.ModSeq) {
		plan.forget, inCycle = true, false
	}
	if !usable {
		return plan
	}
	if after == 0 && (!sameScope || expected.HighestModSeq == nil) {
		plan.start = &mailstore.ReconcileCycle{ModSeq: modSeq, StartedAt: examined}
	}
	// A pass over a folder with no cycle in progress (its sequence
	// recorded, typically) asks nothing at its end.
	plan.complete = inCycle || plan.start != nil
	return plan
}

type pass struct {
	db       DB
	sess     Session
	binding  mailstore.Binding
	opts     Options
	logger   *slog.Logger
	state    imapx.FolderState
	expected *mailstore.Checkpoint
	after    uint32
	// lastStored is the last UID of the pass's last batch.
	lastStored uint32
	// cycle is what the pass still has to do to the reconciliation cycle.
	cycle cyclePlan
	rep   *Report
	// ahead is the next batch's stream, started while the last batch
	// committed; nil when none was started. While it runs, it alone
	// drives the session.
	ahead *bodyStream
	// allowance is what Options.MaxDownloadBytes leaves, by declared size,
	// of the content the streams may still ask for; cut is set once a
	// stream left a message for lack of it, after which no stream asks
	// for anything. Only the stream driving the session touches them
	// (the streams run one after another).
	allowance int64
	cut       bool
	// requested is the declared size of what the streams asked for
	// (Report.RequestedBytes); touched like allowance.
	requested int64
}

func (p *pass) run(ctx context.Context) error {
	// However the pass ends, the session is handed back only once no
	// stream drives it.
	defer func() {
		p.ahead.abandon()
		p.rep.RequestedBytes = p.requested
	}()
	uids, err := p.sess.SearchUIDs(ctx, p.after, p.opts.EarliestDate)
	if err != nil {
		return err
	}
	uids = below(uids, p.state.UIDNext)
	if !p.opts.EarliestDate.IsZero() {
		all, err := p.sess.SearchUIDs(ctx, p.after, time.Time{})
		if err != nil {
			return err
		}
		p.rep.ExcludedByDate = len(below(all, p.state.UIDNext)) - len(uids)
	}

	for len(uids) > 0 && p.rep.Batches < p.opts.BatchesPerRun && !p.stopping() {
		n := min(len(uids), p.opts.BatchSize)
		batch := uids[:n]
		// following and after are the batches this pass stores next, read
		// ahead while this one is stored.
		var following, after []uint32
		if p.rep.Batches+1 < p.opts.BatchesPerRun {
			following = uids[n:min(len(uids), n+p.opts.BatchSize)]
		}
		if p.rep.Batches+2 < p.opts.BatchesPerRun {
			after = uids[min(len(uids), n+p.opts.BatchSize):min(len(uids), n+2*p.opts.BatchSize)]
		}
		if err := p.storeBatch(ctx, batch, following, after); err != nil {
			var (
				withheld *withheldError
				spent    *allowanceSpent
			)
			if errors.As(err, &spent) {
				// Everything of the batch below the message the allowance
				// could not hold is stored: the checkpoint moves up to it,
				// and the pass ends there.
				if below := lastBelow(batch, spent.first); below > p.after {
					if aerr := p.advance(ctx, below, false); aerr != nil {
						return aerr
					}
				}
				p.rep.Batches++
				p.rep.More, p.rep.BudgetReached, p.rep.NextMessageBytes = true, true, spent.size
				return nil
			}
			if errors.As(err, &withheld) {
				// Everything of the batch below the first withheld
				// message is stored: the checkpoint moves up to it.
				if below := lastBelow(batch, withheld.first); below > p.after {
					if aerr := p.advance(ctx, below, false); aerr != nil {
						return aerr
					}
				}
				return withheld.ContentWithheldError
			}
			return err
		}
		uids = uids[n:]
		p.rep.Batches++
		next := batch[len(batch)-1]
		if len(uids) == 0 {
			// The last batch: the final write, below, covers it.
			p.lastStored = next
			break
		}
		if err := p.advance(ctx, next, false); err != nil {
			return err
		}
		// The last batch's commit is the pass's end, which the caller logs.
		p.logger.DebugContext(ctx, "folder pass batch committed", slog.Int("batches", p.rep.Batches),
			slog.Int("stored", p.rep.Stored), slog.Uint64("checkpoint_uid", uint64(next)))
	}
	p.rep.More = len(uids) > 0
	if p.rep.More {
		return nil
	}
	// Everything the search returned is stored. It also inspected everything
	// below UIDNEXT (every UID it excluded by date, every expunged one), so
	// the checkpoint moves to the end rather than rescanning it; the write is
	// made even when nothing moved, because it is what schedules the window.
	// The UID space is now walked to its end, so it is the one served, and
	// a reconciliation cycle may complete.
	err = p.advance(ctx, p.safeEnd(max(p.after, p.lastStored)), true)
	if err == nil && p.rep.Scope.Replaced {
		p.logger.WarnContext(ctx, "the folder was recreated on the server (its UIDVALIDITY changed): its new copy is now served, and the old one is kept but no longer served",
			slog.Int("no_longer_served", p.rep.Scope.Invalidated))
	}
	return err
}

// stopping reports that the process is shutting down.
func (p *pass) stopping() bool {
	select {
	case <-p.opts.Stopping:
		return true
	default:
		return false
	}
}

// safeEnd is where a pass that consumed every search result may put the
// checkpoint: the highest UID the server had assigned when the folder was
// opened (UIDNEXT-1), never speculatively beyond it.
func (p *pass) safeEnd(last uint32) uint32 {
	if p.state.UIDNext > 0 {
		return max(last, p.state.UIDNext-1)
	}
	return last
}

// advance writes the checkpoint, and with it, in one transaction, what the
// pass's cyclePlan still has to do. final marks the pass's final write,
// made once the UID space is walked to its end: it makes that space the
// one served, completes a reconciliation cycle the plan allows, and runs
// AfterFinalCheckpoint.
func (p *pass) advance(ctx context.Context, uid uint32, final bool) error {
	next := mailstore.Checkpoint{
		FolderID:       p.binding.ID,
		UIDValidity:    p.state.UIDValidity,
		LastSeenUID:    uid,
		SynchronizedAt: time.Now(),
	}
	if p.expected != nil && p.expected.UIDValidity == next.UIDValidity && !p.cycle.forget {
		// The modification sequence a reconciliation recorded belongs to
		// this UID space and survives forward progress.
		next.HighestModSeq = p.expected.HighestModSeq
	}
	var (
		scope mailstore.ScopeChange
		cycle []string
	)
	err := pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error {
		cycle = cycle[:0]
		if err := mailstore.AdvanceCheckpoint(ctx, tx, p.expected, next); err != nil {
			return err
		}
		if p.expected == nil {
			if err := mailstore.ServeFirstScope(ctx, tx, p.binding.ID, next.UIDValidity); err != nil {
				return err
			}
		}
		if p.cycle.forget {
			if err := mailstore.ForgetModSeq(ctx, tx, p.binding.ID, next.UIDValidity); err != nil {
				return err
			}
			cycle = append(cycle, "forgotten")
		}
		if p.cycle.start != nil {
			started, err := mailstore.StartReconcileCycle(ctx, tx, p.binding.ID, next.UIDValidity, *p.cycle.start)
			if err != nil {
				return err
			}
			if started {
				cycle = append(cycle, "started")
			}
		}
		if !final {
			return nil
		}
		var err error
		if scope, err = mailstore.ServeScope(ctx, tx, p.binding.ID, next.UIDValidity); err != nil {
			return err
		}
		if p.cycle.complete {
			// Every UID the server had assigned at the EXAMINE was read:
			// a cycle whose every stored occurrence was observed since it
			// began is complete, exactly as a window would find it.
			completed, err := mailstore.CompleteReconcileCycle(ctx, tx, p.binding.ID, next.UIDValidity)
			if err != nil {
				return err
			}
			if completed {
				cycle = append(cycle, "completed")
			}
		}
		if p.opts.AfterFinalCheckpoint != nil {
			return p.opts.AfterFinalCheckpoint(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// next.Cycle is not what the row now holds; AdvanceCheckpoint ignores
	// it, so a later write of this pass keeps the row's cycle. Only the
	// final write completes one, and nothing is written after it.
	p.expected = &next
	p.after = uid
	p.rep.CheckpointUID = uid
	if final {
		p.rep.Scope = scope
	}
	p.cycle.forget, p.cycle.start = false, nil
	for _, c := range cycle {
		p.rep.Cycle = strings.TrimPrefix(p.rep.Cycle+","+c, ",")
	}
	return nil
}

// storeBatch stores one batch and adds its counts to the report. next and
// after, when not empty, are the batches that follow it in this pass: they
// are read ahead while this one is stored (bodyStream).
func (p *pass) storeBatch(ctx context.Context, batch, next, after []uint32) error {
	var c counts
	err := p.batch(ctx, batch, next, after, &c)
	var (
		withheld *withheldError
		spent    *allowanceSpent
	)
	if err != nil && !errors.As(err, &withheld) && !errors.As(err, &spent) {
		return err
	}
	p.rep.Stored += c.stored
	p.rep.Unreadable += c.unreadable
	p.rep.Oversized += c.oversized
	p.rep.Vanished += c.vanished
	p.rep.Bytes += c.bytes
	p.rep.ExpungedBeforeFetch += c.expungedBeforeFetch
	p.rep.Withheld += c.withheld
	p.rep.Shared += c.shared
	return err
}

// counts are one batch's; they join the report only when the batch is
// committed.
type counts struct {
	stored, unreadable, oversized, vanished int
	expungedBeforeFetch, withheld           int
	shared                                  int
	bytes                                   int64
}

// withheldError is a batch's ContentWithheldError with the first UID the
// checkpoint must stay below.
type withheldError struct {
	*ContentWithheldError
	first uint32
}

// allowanceSpent ends a batch whose stream left the message first, of
// declared size size, and everything after it, for lack of allowance
// (Options.MaxDownloadBytes). What the batch stored below it is committed.
type allowanceSpent struct {
	first uint32
	size  int64
}

func (e *allowanceSpent) Error() string {
	return "forwardpass: the download allowance cannot hold the next message"
}

// lastBelow returns the highest of the ascending uids below limit, or 0.
func lastBelow(uids []uint32, limit uint32) uint32 {
	var last uint32
	for _, u := range uids {
		if u >= limit {
			break
		}
		last = u
	}
	return last
}

func (p *pass) batch(ctx context.Context, batch, next, after []uint32, c *counts) error {
	s := p.ahead
	p.ahead = nil
	if s != nil && s.first != batch[0] {
		s.abandon()
		s = nil
	}
	// The join runs while the stream read ahead may still read.
	batch, err := p.join(ctx, batch)
	if err != nil || len(batch) == 0 {
		s.abandon()
		return err
	}
	if s == nil {
		s = p.startStream(ctx, batch, next, nil)
	}
	// However the batch ends, its stream has handed the session back.
	defer s.abandon()
	meta, observed, err := s.metadata()
	if err != nil {
		return err
	}
	// The emails the server's identities already name: their occurrences
	// are recorded without content, and the stream asks for none of it.
	shared, err := p.sharedEmails(ctx, s.identities)
	if err != nil {
		s.decide(nil)
		return err
	}
	// A message the batch holds under two UIDs (a server may name two
	// copies in one folder as one message) is fetched once: the later
	// UIDs are written as its occurrences once the batch has committed.
	repeats := p.repeatedIdentities(batch, s.identities, shared)
	skip := maps.Clone(shared)
	for u := range repeats {
		if skip == nil {
			skip = map[uint32]mailstore.SharedEmail{}
		}
		skip[u] = mailstore.SharedEmail{}
	}
	s.decide(skip)
	<-s.planned
	var spent *allowanceSpent
	if s.cutAt != 0 {
		// The stream asks for nothing from the message the allowance
		// cannot hold on: the batch ends before it.
		spent = &allowanceSpent{first: s.cutAt, size: s.cutSize}
		batch = batch[:lastIndexBelow(batch, s.cutAt)]
		if len(batch) == 0 {
			return spent
		}
	}
	// The stream may have been started before the join, so its metadata
	// may name UIDs the join carried; those are left out.
	keep := make(map[uint32]bool, len(batch))
	for _, u := range batch {
		keep[u] = true
	}
	byUID := make(map[uint32]imapx.MessageMetadata, len(meta))
	for _, m := range meta {
		if keep[m.UID] {
			byUID[m.UID] = m
		}
	}
	c.vanished = len(batch) - len(byUID)

	w := newWriter(p.writers(), p.opts.GroupMessages, p.opts.GroupBytes, p.opts.Extraction, p.opts.CommitAttempts)
	w.offer = p.opts.Offer
	defer w.rollback(ctx)

	for _, uid := range batch {
		m, ok := byUID[uid]
		if !ok {
			continue
		}
		if e, known := shared[uid]; known {
			o := p.occurrence(m, observed, nil, e.Availability)
			p.identify(&o, s.identities[uid])
			o.SharedEmailID, o.SharedUnserved = e.ID, !e.Served
			if err := w.write(ctx, o); err != nil {
				return err
			}
			c.shared++
			continue
		}
		if m.Size > p.opts.MaxRawMimeBytes {
			o := p.occurrence(m, observed, nil, mailstore.ExceededSizeLimit)
			p.identify(&o, s.identities[uid])
			if err := w.write(ctx, o); err != nil {
				return err
			}
			c.oversized++
		}
	}

	written := make(map[uint32]bool, len(byUID))
	store := func(b imapx.Body) error {
		m, ok := byUID[b.UID]
		_, isShared := shared[b.UID]
		if !ok || written[b.UID] || isShared || m.Size > p.opts.MaxRawMimeBytes {
			// An answer for a UID this batch did not ask about or its join
			// carried, or a second answer for one already written: writing
			// it again on the other lane would wait on the first write's
			// uncommitted row, which commits only after both lanes answer.
			return nil
		}
		written[b.UID] = true
		if b.Exceeded {
			c.oversized++
			o := p.occurrence(m, observed, nil, mailstore.ExceededSizeLimit)
			p.identify(&o, s.identities[b.UID])
			return w.write(ctx, o)
		}
		c.stored++
		c.bytes += int64(len(b.Raw))
		o := p.occurrence(m, observed, b.Raw, mailstore.Available)
		p.identify(&o, s.identities[b.UID])
		// The stream's copy is the body's alone: the writer keeps it.
		if err := w.writeOwned(ctx, o); err != nil {
			return err
		}
		if !w.lastReadable {
			c.unreadable++
		}
		return nil
	}
	for b := range s.bodies {
		err := store(b)
		s.release(b)
		if err != nil {
			return err
		}
	}
	if s.err != nil {
		return s.err
	}
	// A requested body that never arrived is not a stored message.
	var missing []uint32
	for _, u := range s.requested {
		if _, ok := byUID[u]; ok && !written[u] {
			missing = append(missing, u)
		}
	}
	if spent != nil {
		// Nothing after the cut is read ahead.
		next = nil
	}
	if err := p.commitReadingAhead(ctx, w, s, next, after); err != nil {
		return err
	}
	unheld, err := p.writeRepeats(ctx, repeats, byUID, s.identities, observed, c)
	if err != nil {
		return err
	}
	missing = append(missing, unheld...)
	slices.Sort(missing)
	if err := p.settleMissing(ctx, batch, missing, byUID, observed, c); err != nil || spent == nil {
		return err
	}
	return spent
}

// lastIndexBelow returns how many of the ascending uids are below limit.
func lastIndexBelow(uids []uint32, limit uint32) int {
	n := 0
	for n < len(uids) && uids[n] < limit {
		n++
	}
	return n
}

// commitReadingAhead commits the batch's last group and, when next is not
// empty, starts next's stream meanwhile, after s (the batch's own), so the
// link to the server carries mail while the database commits, and while
// the checkpoint and next's join are written after it. Nothing the stream
// reads is written before next's batch starts, which is only after this
// one's checkpoint, and only what survives next's join and metadata is
// written. A failed metadata read is next's failure, returned when next
// starts; a failed commit is this batch's, and the stream is abandoned
// when the pass ends.
func (p *pass) commitReadingAhead(ctx context.Context, w *writer, s *bodyStream, next, after []uint32) error {
	if len(next) > 0 {
		p.ahead = p.startStream(ctx, next, after, s)
	}
	return w.commit(ctx)
}

// join joins the batch's UIDs to the placements of MailFathom's own that
// the server named by COPYUID (mailstore.JoinPlacements), in a transaction
// of its own, and returns the UIDs left to fetch: a relocated message is
// the stored email carried across, and nothing of it is fetched. Each
// joined change is named at Debug with its kind, the mutation and the
// local email, nothing from the message.
func (p *pass) join(ctx context.Context, batch []uint32) ([]uint32, error) {
	var joined []mailstore.PlacementJoin
	err := pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error {
		var err error
		joined, err = mailstore.JoinPlacements(ctx, tx, p.binding.ID, p.state.UIDValidity, batch, time.Now())
		return err
	})
	if err != nil || len(joined) == 0 {
		return batch, err
	}
	carried := make(map[uint32]bool, len(joined))
	for _, j := range joined {
		if j.Kind == mailstore.MutationRelocate {
			carried[j.UID] = true
			p.rep.CarriedByMailFathom++
		} else {
			p.rep.CopiedByMailFathom++
		}
		p.logger.DebugContext(ctx, "discovery withheld: a change of MailFathom's own",
			slog.String("kind", string(j.Kind)), slog.String("mutation", j.MutationID.String()),
			slog.String("email", j.EmailID.String()), slog.Uint64("uid", uint64(j.UID)))
	}
	rest := batch[:0:0]
	for _, u := range batch {
		if !carried[u] {
			rest = append(rest, u)
		}
	}
	return rest, nil
}

// settleMissing decides what became of the messages whose body the server
// did not deliver: an identifier-only search tells the ones that left the
// folder (counted and stepped over) from the ones it still lists, whose
// content it withheld. Those are counted per pass; once a message has been
// withheld in MaxWithheldPasses passes it is recorded as ContentWithheld,
// like one over the size limit, and the pass moves on. Otherwise the batch
// ends with a *withheldError, and the checkpoint stays below it. It runs
// after the batch committed, on the pass's own connection.
func (p *pass) settleMissing(ctx context.Context, batch, missing []uint32, byUID map[uint32]imapx.MessageMetadata, observed time.Time, c *counts) error {
	if len(missing) == 0 {
		// Content that arrived clears what an earlier pass counted.
		return mailstore.ForgetWithheld(ctx, p.db, p.binding.ID, p.state.UIDValidity, batch)
	}
	// The session is the next batch's stream's until it ends: it is
	// abandoned, and the next batch starts its own.
	p.ahead.abandon()
	p.ahead = nil
	still, err := p.sess.ExistingUIDs(ctx, missing)
	if err != nil {
		return err
	}
	c.expungedBeforeFetch += len(missing) - len(still)
	if len(still) == 0 {
		return nil
	}
	var pending []uint32
	err = pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error {
		pending = pending[:0]
		passes, err := mailstore.NoteWithheld(ctx, tx, p.binding.ID, p.state.UIDValidity, still)
		if err != nil {
			return err
		}
		var recorded []uint32
		for _, u := range still {
			if passes[u] < MaxWithheldPasses {
				pending = append(pending, u)
				continue
			}
			if _, err := searchindex.WriteOccurrence(ctx, tx, p.occurrence(byUID[u], observed, nil, mailstore.ContentWithheld), nil); err != nil {
				return err
			}
			recorded = append(recorded, u)
		}
		c.withheld = len(recorded)
		return mailstore.ForgetWithheld(ctx, tx, p.binding.ID, p.state.UIDValidity, recorded)
	})
	if err != nil {
		return err
	}
	if len(pending) == 0 {
		return nil
	}
	p.logger.WarnContext(ctx, "the server lists messages whose content it withholds; the checkpoint stops before them",
		slog.Int("withheld", len(pending)), slog.Int("max_passes", MaxWithheldPasses))
	return &withheldError{ContentWithheldError: &ContentWithheldError{Count: len(pending)}, first: slices.Min(pending)}
}

// occurrence is what the pass stores for m, whose metadata FETCH was sent
// at observed: the flags in it are an observation made then, and take the
// occurrence's place in the reconciliation queue, after every earlier
// observation (mailstore.SelectReconcileWindow says why a flood of new mail
// therefore starves no old mail), and count for the cycle the pass's
// walk belongs to.
func (p *pass) occurrence(m imapx.MessageMetadata, observed time.Time, raw []byte, availability mailstore.Availability) mailstore.Occurrence {
	o := mailstore.Occurrence{
		AccountID:       p.binding.AccountID,
		FolderID:        p.binding.ID,
		UIDValidity:     p.state.UIDValidity,
		UID:             m.UID,
		Size:            m.Size,
		InternalDate:    m.InternalDate,
		Flags:           m.Flags,
		FlagsObservedAt: observed,
		Subject:         m.Subject,
		MessageID:       m.MessageID,
		SentAt:          m.SentAt,
		Availability:    availability,
		Raw:             raw,
	}
	return o
}

// identityKey is a server identity as stored: its scheme, then the
// server's value, so an X-GM-MSGID and an EMAILID never meet.
func identityKey(scheme imapx.IdentityScheme, id string) string {
	return string(scheme) + ":" + id
}

// identify adds the server's identity and labels of the message to o.
func (p *pass) identify(o *mailstore.Occurrence, id imapx.MessageIdentity) {
	if id.EmailID == "" {
		return
	}
	scheme := p.sess.IdentityScheme()
	o.ServerEmailID = identityKey(scheme, id.EmailID)
	if id.ThreadID != "" {
		o.ServerThreadID = identityKey(scheme, id.ThreadID)
	}
	o.Labels = id.Labels
}

// sharedEmails returns, by UID, the stored emails that the server's
// identities of the batch already name, read on the pass's own connection
// (no write of the batch is in flight yet).
func (p *pass) sharedEmails(ctx context.Context, ids map[uint32]imapx.MessageIdentity) (map[uint32]mailstore.SharedEmail, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	scheme := p.sess.IdentityScheme()
	keys := make([]string, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, identityKey(scheme, id.EmailID))
	}
	held, err := mailstore.EmailsByServerIdentity(ctx, p.db, p.binding.AccountID, keys)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	out := make(map[uint32]mailstore.SharedEmail, len(held))
	for uid, id := range ids {
		if e, ok := held[identityKey(scheme, id.EmailID)]; ok {
			out[uid] = e
		}
	}
	return out, nil
}

// repeatedIdentities returns the UIDs of batch whose server identity an
// earlier UID of the batch has, and no stored email holds yet.
func (p *pass) repeatedIdentities(batch []uint32, ids map[uint32]imapx.MessageIdentity, shared map[uint32]mailstore.SharedEmail) map[uint32]bool {
	if len(ids) < 2 {
		return nil
	}
	var (
		seen    = make(map[string]bool, len(ids))
		repeats map[uint32]bool
	)
	for _, u := range batch {
		id, ok := ids[u]
		if _, held := shared[u]; !ok || held {
			continue
		}
		if seen[id.EmailID] {
			if repeats == nil {
				repeats = map[uint32]bool{}
			}
			repeats[u] = true
			continue
		}
		seen[id.EmailID] = true
	}
	return repeats
}

// writeRepeats writes the batch's repeated identities as occurrences of
// the email the batch stored for them, after the batch committed. It
// returns the UIDs whose email the batch did not store after all (its
// first UID vanished or was withheld): their content was not fetched, so
// they are settled as any message whose content did not arrive.
func (p *pass) writeRepeats(ctx context.Context, repeats map[uint32]bool, byUID map[uint32]imapx.MessageMetadata,
	ids map[uint32]imapx.MessageIdentity, observed time.Time, c *counts) ([]uint32, error) {
	if len(repeats) == 0 {
		return nil, nil
	}
	uids := slices.Sorted(maps.Keys(repeats))
	var unheld []uint32
	err := pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error {
		unheld = unheld[:0]
		keys := make([]string, 0, len(uids))
		scheme := p.sess.IdentityScheme()
		for _, u := range uids {
			keys = append(keys, identityKey(scheme, ids[u].EmailID))
		}
		held, err := mailstore.EmailsByServerIdentity(ctx, tx, p.binding.AccountID, keys)
		if err != nil {
			return err
		}
		for i, u := range uids {
			m, ok := byUID[u]
			if !ok {
				continue
			}
			e, ok := held[keys[i]]
			if !ok {
				unheld = append(unheld, u)
				continue
			}
			o := p.occurrence(m, observed, nil, e.Availability)
			p.identify(&o, ids[u])
			o.SharedEmailID = e.ID
			if _, err := searchindex.WriteOccurrence(ctx, tx, o, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.shared += len(uids) - len(unheld)
	return unheld, nil
}

// below keeps the UIDs under uidNext: mail that arrived after the folder
// was opened belongs to the next pass, which keeps the checkpoint's cap
// simple and strict.
func below(uids []uint32, uidNext uint32) []uint32 {
	if uidNext == 0 {
		return uids
	}
	out := uids[:0:0]
	for _, u := range uids {
		if u < uidNext {
			out = append(out, u)
		}
	}
	return out
}

func (p *pass) writers() []DB {
	if p.opts.SecondWriter != nil {
		return []DB{p.db, p.opts.SecondWriter}
	}
	return []DB{p.db}
}
