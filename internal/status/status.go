// Package status answers what an operator asks first, per configured
// account and folder alias: which mode it runs in, when it last
// synchronized, when it runs next and why then, whether its server
// throttles it and until when, what its daily download budget holds, what
// is stored, how far it got and what last failed, which of its mailbox
// mutations are not finished, and how many of its messages await
// embedding. `mailfathom status`, GET /api/v1/status, the
// /status page and the run metrics on /metrics all read one Report, so
// they cannot disagree.
//
// Everything is read from PostgreSQL when asked, so every replica answers
// the same and the process keeps nothing per account. A Report carries no
// mail: account ids and folder aliases are configuration, the rest counts,
// times and failure identities.
package status

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/jobs"
)

// Querier is what Read runs on: a pool or a connection.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Report is the status of every configured account.
type Report struct {
	GeneratedAt time.Time `json:"generated_at"`
	// SyncEnabled is MAILFATHOM_SYNC_ENABLED.
	SyncEnabled bool `json:"sync_enabled"`
	// Embedding is the embedding backlog under the active profile; nil
	// when no profile is configured (MAILFATHOM_EMBEDDING_PROVIDER_URL).
	Embedding *Embedding `json:"embedding,omitempty"`
	Accounts  []Account  `json:"accounts"`
}

// Embedding is the embedding backlog under the active profile.
type Embedding struct {
	// Model and Dimensions are the active profile's identity, as
	// configured.
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
	// ProfileID is the recorded profile's id, 0 until the first embed job
	// or semantic search records it.
	ProfileID int16 `json:"profile_id"`
	// AnsweredModel is the model the provider's answers named for the
	// profile's vectors, recorded from the first answer that named one;
	// empty until then. An answer naming another model is refused
	// (EmbeddingModelChanged on its embed job, in River UI).
	AnsweredModel string `json:"answered_model,omitempty"`
	// BacklogJobs counts the embed jobs waiting to run (available) on the
	// embeddings queue, counted no further than a million.
	BacklogJobs int `json:"backlog_jobs"`
	// AwaitingMessages counts the served messages, of every account, with
	// a passage awaiting a vector under the profile: one that has none and
	// that the provider has not refused.
	AwaitingMessages int64 `json:"awaiting_messages"`
	// RefusedPassages counts the served messages' passages, of every
	// account, the provider refused under the profile (400, 413 or 422 to
	// a request of the passage alone). They do not await a vector: they
	// are offered again only once their text changes.
	RefusedPassages int64 `json:"refused_passages"`
}

// Mutations counts the mailbox mutations that are recorded and not
// completed, by state, and the completed placements that stay unjoined.
type Mutations struct {
	// Pending: not yet attempted, or to be attempted again.
	Pending int64 `json:"pending"`
	// Converging: every command answered; synchronization has yet to see
	// the result.
	Converging int64 `json:"converging"`
	// DeadLettered: given up on; kept for an operator to look at.
	DeadLettered int64 `json:"dead_lettered"`
	// CompletedUnjoined counts the completed moves and copies the server
	// carried without naming the placement ("completed, unjoined"): the
	// destination's copy is stored as a message of its own and a move's
	// source is tombstoned once it is seen to leave. They are completed,
	// so not outstanding, and are counted for good.
	CompletedUnjoined int64 `json:"completed_unjoined"`
}

// MutationStates are the state labels of the outstanding mutation
// metrics, in the order of Mutations' outstanding fields.
var MutationStates = []string{"pending", "converging", "dead-lettered"}

// ByState returns the count of state, one of MutationStates.
func (m Mutations) ByState(state string) int64 {
	switch state {
	case "pending":
		return m.Pending
	case "converging":
		return m.Converging
	case "dead-lettered":
		return m.DeadLettered
	}
	return 0
}

func (m *Mutations) add(state mailstore.MutationState, n int64) {
	switch state {
	case mailstore.MutationPending:
		m.Pending += n
	case mailstore.MutationConverging:
		m.Converging += n
	case mailstore.MutationDeadLettered:
		m.DeadLettered += n
	}
}

// FailedMutation identifies an account's latest failed mutation: its id,
// kind, state and five-digit failure code; never the mail it concerns.
type FailedMutation struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	State       string    `json:"state"`
	FailureCode string    `json:"failure_code"`
	At          time.Time `json:"at"`
}

// Account is one configured account's status.
type Account struct {
	ID string `json:"id"`
	// ConfiguredMode is the account's MODE.
	ConfiguredMode string `json:"configured_mode"`
	// ConsecutiveFailures counts the failed runs in a row, the current
	// run's failure included once it has failed.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// BackoffSeconds is the shortest wait before the next run as the
	// failures stand: the interval when none failed.
	BackoffSeconds float64 `json:"backoff_seconds"`
	// NextRun is the account's coming or running run; nil when it has
	// none (synchronization disabled, or about to be repaired).
	NextRun     *NextRun `json:"next_run,omitempty"`
	LastFailure *Failure `json:"last_failure,omitempty"`
	// Mutations counts the account's outstanding mailbox mutations,
	// whichever folder they come from.
	Mutations Mutations `json:"mutations"`
	// LastFailedMutation is the outstanding mutation that most recently
	// failed; nil when none has.
	LastFailedMutation *FailedMutation `json:"last_failed_mutation,omitempty"`
	// AwaitingVectors counts the account's served messages awaiting
	// vectors under the active profile; nil when no profile is configured.
	AwaitingVectors *int64 `json:"awaiting_vectors,omitempty"`
	// RefusedPassages counts the account's served messages' passages the
	// provider refused under the active profile; nil when no profile is
	// configured.
	RefusedPassages *int64 `json:"refused_passages,omitempty"`
	// Compression is whether the account's most recent forward pass read
	// mail over a compressed connection, and why; nil before its first
	// pass.
	Compression *Compression `json:"compression,omitempty"`
	// Throttled is, while the account's server throttles it, until when
	// and why: the account's work waits, and no failure is counted; nil
	// otherwise.
	Throttled *Throttled `json:"throttled,omitempty"`
	// Throttles counts the throttling answers the account's server gave,
	// by reason, since the database was created; empty when none.
	Throttles map[string]int64 `json:"throttles,omitempty"`
	// DownloadBudget is the account's daily download budget and what the
	// window holds; nil when the account has none.
	DownloadBudget *DownloadBudget `json:"download_budget,omitempty"`
	Folders        []Folder        `json:"folders"`
}

// Throttled is a throttle the account's server imposed that still holds.
type Throttled struct {
	// Until is when the account's work asks the server again.
	Until time.Time `json:"until"`
	// InSeconds is how far away Until is.
	InSeconds float64 `json:"in_seconds"`
	// Reason is the fixed word of the server's answer: Unavailable,
	// Limit, OverQuota, InUse, Throttled, RequestThrottled,
	// BandwidthExceeded or TooManyConnections.
	Reason string `json:"reason"`
	// SuggestedDelaySeconds is the wait the server suggested; nil when it
	// suggested none (the account waits its run backoff then).
	SuggestedDelaySeconds *float64 `json:"suggested_delay_seconds,omitempty"`
	// At is when the server throttled the account.
	At time.Time `json:"at"`
	// InARow counts the throttles since the account last completed a
	// folder pass.
	InARow int `json:"in_a_row"`
}

// DownloadBudget is an account's daily download budget
// (MAILFATHOM_ACCOUNTS_<i>_MAX_DOWNLOAD_BYTES_PER_DAY), spent over a
// rolling 24-hour window.
type DownloadBudget struct {
	BytesPerDay int64 `json:"bytes_per_day"`
	// UsedBytes is the content downloaded, or claimed by a pass under way,
	// within the window.
	UsedBytes int64 `json:"used_bytes"`
	// WindowHours is the window: 24.
	WindowHours int `json:"window_hours"`
	// ContinuesAt is, when a pass stopped at the budget, when its folder
	// continues; nil otherwise.
	ContinuesAt        *time.Time `json:"continues_at,omitempty"`
	ContinuesInSeconds *float64   `json:"continues_in_seconds,omitempty"`
}

// Compression is what a forward pass decided about COMPRESS=DEFLATE.
type Compression struct {
	InUse bool `json:"in_use"`
	// Reason says why, in a fixed phrase: "configured on", "the server is
	// on a loopback address", "the server does not offer
	// COMPRESS=DEFLATE", ….
	Reason string `json:"reason"`
}

// Why a next run is when it is.
const (
	WhyRunning  = "running"   // the run is under way
	WhyDue      = "due"       // due now, waiting for a worker or a slot
	WhyInterval = "interval"  // the interval after a run that did not fail
	WhyBackoff  = "backoff"   // the backoff failed runs earned
	WhyRetry    = "retry"     // River retries a run that failed
	WhyThrottle = "throttled" // the account's server throttles it until then
)

// NextRun is when an account runs next and why then.
type NextRun struct {
	At time.Time `json:"at"`
	// InSeconds is how far away At is, 0 once due.
	InSeconds float64 `json:"in_seconds"`
	// Why is WhyRunning, WhyDue, WhyInterval, WhyBackoff, WhyRetry or
	// WhyThrottle.
	Why string `json:"why"`
}

// Failure is the last failure of an account or folder.
type Failure struct {
	Identity string    `json:"identity"`
	At       time.Time `json:"at"`
}

// Folder is one configured folder alias's status.
type Folder struct {
	Alias string `json:"alias"`
	// EffectiveMode is how the folder learns of new mail now: Push while
	// the account's watch keeps it watched, Polling otherwise (the account
	// polls, the server offers no way to watch it, it is past the
	// subscription's bound, push is degraded, or the alias is unresolved).
	EffectiveMode string `json:"effective_mode"`
	// Unresolved is, when the account's latest run resolved the alias to
	// no folder, the identity of why (FolderAliasUnresolved: no folder
	// matches, FolderAliasAmbiguous: several do); nothing synchronizes or
	// watches the folder until a run resolves it. Empty otherwise.
	Unresolved string `json:"unresolved,omitempty"`
	// Bound reports that the alias has been resolved to a remote folder.
	Bound bool `json:"bound"`
	// LastPassAt and LastSuccessAt are when a forward pass last ran and
	// last walked the folder to its end; the ages are as of GeneratedAt.
	LastPassAt            *time.Time `json:"last_pass_at,omitempty"`
	LastPassAgeSeconds    *float64   `json:"last_pass_age_seconds,omitempty"`
	LastSuccessAt         *time.Time `json:"last_success_at,omitempty"`
	LastSuccessAgeSeconds *float64   `json:"last_success_age_seconds,omitempty"`
	Checkpoint            Checkpoint `json:"checkpoint"`
	Messages              Messages   `json:"messages"`
	// Handled counts what the forward passes did, cumulatively, by outcome.
	Handled     map[string]int `json:"handled"`
	LastFailure *Failure       `json:"last_failure,omitempty"`
	// Mutations counts the outstanding mailbox mutations whose source is
	// this alias.
	Mutations Mutations `json:"mutations"`
	// AwaitingVectors counts the alias's served messages awaiting vectors
	// under the active profile; nil when no profile is configured.
	AwaitingVectors *int64 `json:"awaiting_vectors,omitempty"`
	// RefusedPassages counts the alias's served messages' passages the
	// provider refused under the active profile; nil when no profile is
	// configured.
	RefusedPassages *int64 `json:"refused_passages,omitempty"`
}

// Checkpoint is how far the folder's latest binding got.
type Checkpoint struct {
	UIDValidity uint32 `json:"uid_validity"`
	LastSeenUID uint32 `json:"last_seen_uid"`
	// ExaminedUIDNext is the UIDNEXT the latest forward pass found: the
	// folder is read to its end when LastSeenUID reaches one below it. 0
	// before the first pass.
	ExaminedUIDNext uint32 `json:"examined_uid_next"`
}

// Messages counts what is stored of the folder now.
type Messages struct {
	Stored     int `json:"stored"`
	Oversized  int `json:"oversized"`
	Withheld   int `json:"content_withheld"`
	Tombstoned int `json:"tombstoned"`
}

// Options are what Read needs besides the database.
type Options struct {
	// Config is the configuration in force. Required.
	Config *config.Config
	// Backoff is the shortest wait before an account's next run after
	// failures failed runs in a row. Required.
	Backoff func(failures int) time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Read builds the report of every configured account.
func Read(ctx context.Context, q Querier, opts Options) (Report, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	cfg := opts.Config
	r := Report{GeneratedAt: now(), SyncEnabled: cfg.Sync.Enabled, Accounts: []Account{}}
	states, folderStates, err := mailstore.RunStates(ctx, q)
	if err != nil {
		return r, err
	}
	contents, err := mailstore.Contents(ctx, q)
	if err != nil {
		return r, err
	}
	runs, err := jobqueue.PendingRuns(ctx, q, jobs.AccountRun{}.Kind())
	if err != nil {
		return r, err
	}
	mutations, err := mailstore.OutstandingMutationsByFolder(ctx, q)
	if err != nil {
		return r, err
	}
	unjoined, err := mailstore.UnjoinedPlacements(ctx, q)
	if err != nil {
		return r, err
	}
	failedMutations, err := mailstore.LastFailedMutations(ctx, q)
	if err != nil {
		return r, err
	}
	throttles, err := mailstore.Throttles(ctx, q)
	if err != nil {
		return r, err
	}
	throttleCounts, err := mailstore.ThrottleCounts(ctx, q)
	if err != nil {
		return r, err
	}
	downloads, err := mailstore.DownloadStates(ctx, q, r.GeneratedAt)
	if err != nil {
		return r, err
	}
	var backlog []searchindex.FolderBacklog
	var refusals []searchindex.FolderRefusals
	if e := cfg.Embedding; e.Configured() {
		if r.Embedding, backlog, refusals, err = readEmbedding(ctx, q, e); err != nil {
			return r, err
		}
	}
	accountStates := map[string]mailstore.AccountState{}
	for _, st := range states {
		accountStates[st.AccountKey] = st
	}
	throttled := map[string]*Throttled{}
	for _, th := range throttles {
		if th.Until.After(r.GeneratedAt) {
			throttled[th.AccountKey] = throttledOf(th, r.GeneratedAt)
		}
	}
	counts := map[string]map[string]int64{}
	for _, c := range throttleCounts {
		if counts[c.AccountKey] == nil {
			counts[c.AccountKey] = map[string]int64{}
		}
		counts[c.AccountKey][c.Reason] = c.Count
	}
	downloaded := map[string]mailstore.DownloadState{}
	for _, d := range downloads {
		downloaded[d.AccountKey] = d
	}
	type folderKey struct{ account, alias string }
	folderState := map[folderKey]mailstore.FolderState{}
	for _, f := range folderStates {
		folderState[folderKey{f.AccountKey, f.Alias}] = f
	}
	content := map[folderKey]mailstore.FolderContents{}
	for _, c := range contents {
		content[folderKey{c.AccountKey, c.Alias}] = c
	}
	folderMutations := map[folderKey]Mutations{}
	accountMutations := map[string]Mutations{}
	for _, m := range mutations {
		fm, am := folderMutations[folderKey{m.AccountKey, m.Alias}], accountMutations[m.AccountKey]
		fm.add(m.State, m.Count)
		am.add(m.State, m.Count)
		folderMutations[folderKey{m.AccountKey, m.Alias}], accountMutations[m.AccountKey] = fm, am
	}
	for _, m := range unjoined {
		fm, am := folderMutations[folderKey{m.AccountKey, m.Alias}], accountMutations[m.AccountKey]
		fm.CompletedUnjoined += m.Count
		am.CompletedUnjoined += m.Count
		folderMutations[folderKey{m.AccountKey, m.Alias}], accountMutations[m.AccountKey] = fm, am
	}
	lastFailedMutation := map[string]*FailedMutation{}
	for _, m := range failedMutations {
		lastFailedMutation[m.AccountKey] = &FailedMutation{
			ID: m.ID.String(), Kind: string(m.Kind), State: string(m.State), FailureCode: m.FailureCode, At: m.At,
		}
	}
	folderBacklog := map[folderKey]int64{}
	accountBacklog := map[string]int64{}
	for _, b := range backlog {
		folderBacklog[folderKey{b.AccountKey, b.Alias}] = b.Awaiting
		accountBacklog[b.AccountKey] += b.Awaiting
	}
	folderRefused := map[folderKey]int64{}
	accountRefused := map[string]int64{}
	for _, f := range refusals {
		folderRefused[folderKey{f.AccountKey, f.Alias}] = f.Refused
		accountRefused[f.AccountKey] += f.Refused
	}
	awaiting := func(n int64) *int64 {
		if r.Embedding == nil {
			return nil
		}
		return &n
	}

	for _, a := range cfg.Accounts {
		key := config.AccountKey(a.ID)
		st := accountStates[key]
		failures := st.ConsecutiveFailures
		if st.RunFailed {
			failures++
		}
		acct := Account{
			ID: a.ID, ConfiguredMode: string(a.Mode), ConsecutiveFailures: failures,
			BackoffSeconds: opts.Backoff(failures).Seconds(), Folders: []Folder{},
			Mutations: accountMutations[key], LastFailedMutation: lastFailedMutation[key],
			AwaitingVectors: awaiting(accountBacklog[key]), RefusedPassages: awaiting(accountRefused[key]),
		}
		if st.LastFailureAt != nil {
			acct.LastFailure = &Failure{Identity: st.LastFailureIdentity, At: *st.LastFailureAt}
		}
		acct.Throttled, acct.Throttles = throttled[key], counts[key]
		if a.MaxDownloadBytesPerDay > 0 {
			acct.DownloadBudget = downloadBudget(a.MaxDownloadBytesPerDay, downloaded[key], r.GeneratedAt)
		}
		if run, ok := runs[key]; ok {
			acct.NextRun = nextRun(run, failures, r.GeneratedAt)
			if acct.Throttled != nil && acct.NextRun.Why != WhyRunning {
				acct.NextRun.Why = WhyThrottle
			}
		}
		var latest *time.Time
		for _, alias := range aliases(a) {
			k := folderKey{key, alias}
			fs, c := folderState[k], content[k]
			if fs.Compression != nil && fs.LastPassAt != nil && (latest == nil || fs.LastPassAt.After(*latest)) {
				latest = fs.LastPassAt
				acct.Compression = &Compression{InUse: fs.Compression.InUse, Reason: fs.Compression.Reason}
			}
			mode := string(config.ModePolling)
			if a.Mode == config.ModePush && fs.EffectiveMode == mailstore.ModePush && fs.ResolutionFailure == "" {
				mode = mailstore.ModePush
			}
			f := Folder{
				Alias: alias, EffectiveMode: mode, Unresolved: fs.ResolutionFailure,
				Bound:      c.AccountKey != "",
				Checkpoint: Checkpoint{UIDValidity: c.UIDValidity, LastSeenUID: c.LastSeenUID, ExaminedUIDNext: fs.ExaminedUIDNext},
				Messages:   Messages{Stored: c.Stored, Oversized: c.Oversized, Withheld: c.Withheld, Tombstoned: c.Tombstoned},
				Handled:    handled(fs.Counts),
				Mutations:  folderMutations[k], AwaitingVectors: awaiting(folderBacklog[k]),
				RefusedPassages: awaiting(folderRefused[k]),
			}
			f.LastPassAt, f.LastPassAgeSeconds = at(fs.LastPassAt, r.GeneratedAt)
			f.LastSuccessAt, f.LastSuccessAgeSeconds = at(fs.LastSuccessAt, r.GeneratedAt)
			if fs.LastFailureAt != nil {
				f.LastFailure = &Failure{Identity: fs.LastFailureIdentity, At: *fs.LastFailureAt}
			}
			acct.Folders = append(acct.Folders, f)
		}
		r.Accounts = append(r.Accounts, acct)
	}
	return r, nil
}

// backlogCountCap bounds the embed jobs counted, so a read never walks an
// unbounded queue.
const backlogCountCap = 1_000_000

// readEmbedding reads the backlog and the refused passages under e's
// profile without recording the profile: one not yet recorded has no
// vectors and no refusals, so every message with passages awaits them.
func readEmbedding(ctx context.Context, q Querier, e config.Embedding) (*Embedding, []searchindex.FolderBacklog, []searchindex.FolderRefusals, error) {
	id, recorded, err := searchindex.FindProfile(ctx, q, e.Model, e.Dimensions)
	if err != nil {
		return nil, nil, nil, err
	}
	var answered string
	if recorded {
		if answered, err = searchindex.AnsweredModel(ctx, q, id); err != nil {
			return nil, nil, nil, err
		}
	}
	jobsWaiting, err := jobqueue.AvailableJobs(ctx, q, jobs.QueueEmbeddings, jobs.EmbedEmail{}.Kind(), backlogCountCap)
	if err != nil {
		return nil, nil, nil, err
	}
	var backlog []searchindex.FolderBacklog
	if recorded {
		backlog, err = searchindex.AwaitingVectorsByFolder(ctx, q, id)
	} else {
		backlog, err = searchindex.AwaitingWithoutProfile(ctx, q)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	var refusals []searchindex.FolderRefusals
	if recorded {
		if refusals, err = searchindex.RefusedPassagesByFolder(ctx, q, id); err != nil {
			return nil, nil, nil, err
		}
	}
	emb := &Embedding{Model: e.Model, Dimensions: e.Dimensions, ProfileID: id, AnsweredModel: answered, BacklogJobs: jobsWaiting}
	for _, b := range backlog {
		emb.AwaitingMessages += b.Awaiting
	}
	for _, r := range refusals {
		emb.RefusedPassages += r.Refused
	}
	return emb, backlog, refusals, nil
}

// aliases returns the account's configured folder aliases, in order: the
// inbox alias when it configures none.
func aliases(a config.Account) []string {
	if len(a.Folders) == 0 {
		return []string{config.DefaultFolderAlias}
	}
	out := make([]string, len(a.Folders))
	for i, f := range a.Folders {
		out[i] = f.Alias
	}
	return out
}

// Outcomes are the keys of Folder.Handled, in display order.
var Outcomes = []string{"stored", "oversized", "unreadable", "excluded_by_date", "expunged_before_fetch", "content_withheld"}

func handled(c mailstore.PassCounts) map[string]int {
	return map[string]int{
		"stored": c.Stored, "oversized": c.Oversized, "unreadable": c.Unreadable,
		"excluded_by_date": c.ExcludedByDate, "expunged_before_fetch": c.ExpungedBeforeFetch,
		"content_withheld": c.Withheld,
	}
}

func at(t *time.Time, now time.Time) (*time.Time, *float64) {
	if t == nil {
		return nil, nil
	}
	age := now.Sub(*t).Seconds()
	return t, &age
}

// Bytes renders n bytes in decimal units, as providers state their limits
// ("2.5 GB").
func Bytes(n int64) string {
	const unit = 1000
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("kMGTP"[exp]) + "B"
}

func throttledOf(th mailstore.Throttle, now time.Time) *Throttled {
	t := &Throttled{Until: th.Until, InSeconds: th.Until.Sub(now).Seconds(), Reason: th.Reason, At: th.At, InARow: th.Consecutive}
	if th.SuggestedDelay != nil {
		s := th.SuggestedDelay.Seconds()
		t.SuggestedDelaySeconds = &s
	}
	return t
}

func downloadBudget(perDay int64, d mailstore.DownloadState, now time.Time) *DownloadBudget {
	b := &DownloadBudget{BytesPerDay: perDay, UsedBytes: d.Used, WindowHours: int(mailstore.DownloadWindow / time.Hour)}
	if d.PausedUntil != nil {
		in := d.PausedUntil.Sub(now).Seconds()
		b.ContinuesAt, b.ContinuesInSeconds = d.PausedUntil, &in
	}
	return b
}

func nextRun(run jobqueue.PendingRun, failures int, now time.Time) *NextRun {
	n := &NextRun{At: run.ScheduledAt, InSeconds: max(run.ScheduledAt.Sub(now).Seconds(), 0)}
	switch {
	case run.State == "running":
		n.Why = WhyRunning
	case !run.ScheduledAt.After(now):
		n.Why = WhyDue
	case run.State == "retryable":
		n.Why = WhyRetry
	case failures > 0:
		n.Why = WhyBackoff
	default:
		n.Why = WhyInterval
	}
	return n
}
