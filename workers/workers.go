// Package workers holds MailFathom's River workers, one per unit of work:
// an account run, a folder pass (package forwardpass), a reconciliation
// window (package backwardpass), an extraction backfill batch (package
// backfill) and a push account's watch (package push). A worker is thin:
// it claims what the unit needs (its work connection with its liveness
// lock, its concurrency slots, the alias's binding, a read-only mailbox
// session), calls the package that does the work, and returns what
// failed.
//
// Every outbound call a worker makes runs under the outbound resilience
// pipelines (mailbox calls through package mailsession, the work
// connection under DatabaseCommandExecution), and River is the layer
// between attempts. The failure middleware Register returns, installed
// once for every worker, applies ClassifyFailure to whatever a worker
// returns — a dependency that declined the work or a failure that
// declares itself repeatable is retried on the run-backoff schedule
// (NextRetry), a deferral (a concurrency bound reached, a persistence
// conflict) is a river.JobSnooze, and anything unrecognized is a
// river.JobCancel carrying the failure's identity. No worker loops over
// retries of its own, and none classifies a failure itself.
//
// A server that throttles an account is no failure: the failure middleware
// records the throttle for the account and snoozes the unit until the
// server's suggested time (or the run backoff for throttles in a row), and
// every unit of the account waits it out before it asks the server
// anything (throttle.go). A folder pass also spends the account's daily
// download budget, when one is configured, and waits for the window to
// free room when it is spent (download.go).
//
// There is one retry layer between attempts, the account's: every failure
// of an account run, a folder pass or a reconciliation window fails the
// account's current run (mailstore.FailRun, FailFolder); a folder unit
// that fails is not retried on a schedule of its own but waits for the
// account's next run; and each run settles the previous one as it starts
// (mailstore.BeginRun), waiting out the backoff that failed runs in a row
// earned (RunBackoff).
package workers

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailoauth"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/push"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/slots"
	"github.com/mailfathom/mailfathom/jobs"
)

// Dependencies are what the workers are built from. Fill in what the
// deployment has and build them with NewDependencies, which fills the
// rest; Register and the scheduling functions take only what it built.
type Dependencies struct {
	// Pool is the application database. Required.
	Pool *pgxpool.Pool
	// Config is the validated configuration. Required.
	Config *config.Config
	// Resolver resolves secret references per connection. Default: the
	// process environment and the standard secret directories.
	Resolver *secret.Resolver
	// Logger is the fallback logger; a job's own logger comes from its
	// context (jobqueue.Logger). Default: discard.
	Logger *slog.Logger
	// OpenSession opens a read-only IMAP session. Default:
	// imapx.OpenReadSession.
	OpenSession func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error)
	// OpenReconcileSession opens the read-only session of a
	// reconciliation window, which only examines and reconciles. Default:
	// imapx.OpenReconcileSession, one connection instead of a read
	// session's two.
	OpenReconcileSession func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error)
	// OpenWriteConnection opens an account's write connection. Default:
	// imapx.OpenWriteConnection.
	OpenWriteConnection func(ctx context.Context, ep imapx.Endpoint) (*imapx.WriteConnection, error)
	// OpenWatch opens a watching IMAP session. Default:
	// imapx.OpenWatchSession.
	OpenWatch func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error)
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Resilience holds the outbound resilience pipelines every mailbox and
	// authorization-server call runs under. Default: one built from the
	// configuration's budgets, registering no metrics.
	Resilience *resilience.Registry
	// Tokens obtains and caches the access tokens of OAuth accounts; one
	// per process, since it holds each account's cached token. Default:
	// one built over Resolver and Resilience.
	Tokens *mailoauth.Source

	// Push records push synchronization's metrics. Default: none.
	Push *push.Metrics
	// Embedder, when set, is the active embedding profile's provider
	// client: folder passes offer what they store for embedding, and the
	// embed jobs and the embedding backfill run. Default: none, and nothing
	// is offered.
	Embedder *embedding.Client
	// EmbeddingMetrics counts offers and embeddings. Default: none.
	EmbeddingMetrics *embedding.Metrics
	// VectorIndex is the process's copy of the vector index's centroids,
	// which the embed jobs put passages into lists by and the vector
	// index's steps assign with; serve shares it with its searcher.
	// Default: one of the workers' own.
	VectorIndex *searchindex.VectorIndex

	// Stopping, when set, is closed when the process begins to shut down:
	// a folder pass then ends after the batch in flight, with its
	// checkpoint, instead of opening another. Default: never closed.
	Stopping <-chan struct{}

	// writes and stages carry mailbox mutations over each account's one
	// write connection; built by Register, once per process.
	writes *mutation.Connections
	stages *mutation.Stages
	// resolutions tells the process's watches that an account run
	// resolved other folders; one per process, built by Register, so all
	// its push accounts are followed with one query per poll.
	resolutions *push.Resolutions
	// lifetime overrides push.Lifetime. Tests shorten it.
	lifetime time.Duration
	// deferrals, when set, draws the snoozes deferral would. Tests shorten
	// them: a unit that meets a concurrency bound still snoozes and comes
	// back, in moments instead of seconds.
	deferrals func() time.Duration
	// profile caches the active embedding profile's id.
	profile *profileCache
	// vectorIndex is VectorIndex, or the workers' own.
	vectorIndex *searchindex.VectorIndex
	// indexBatch overrides vectorIndexBatch. Tests shorten it.
	indexBatch int
	// gate admits this process's units to the concurrency bounds before
	// they take their slots; one per process, built by Register.
	gate *slots.Gate
	// failures is the failure middleware Register installs, which a
	// carrier applies to what a carried unit returns.
	failures *failureMiddleware

	// acquireConn takes a work connection with its job's liveness lock.
	// Default: liveness.Acquire. Tests slow it down.
	acquireConn func(ctx context.Context, pool *pgxpool.Pool, jobID int64) (*pgxpool.Conn, func(), error)

	// built is set by NewDependencies.
	built bool
}

// endpointEnv is what mailendpoint needs to build an account's endpoint.
func (d Dependencies) endpointEnv() mailendpoint.Env {
	return mailendpoint.Env{Mode: d.Config.SecretInterpretationMode, Resolver: d.Resolver, Registry: d.Resilience, Tokens: d.Tokens}
}

// NewDependencies validates d once and fills what it leaves out with the
// defaults each field documents: the pipelines and the token source are
// built once here, for every worker and function that takes the result. A
// Pool and a Config are required.
func NewDependencies(d Dependencies) (Dependencies, error) {
	if d.Pool == nil || d.Config == nil {
		return d, errors.New("workers: a pool and a configuration are required")
	}
	d.Resolver = cmp.Or(d.Resolver, &secret.Resolver{})
	d.Logger = cmp.Or(d.Logger, slog.New(slog.DiscardHandler))
	if d.OpenSession == nil {
		d.OpenSession = func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
			return imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{})
		}
	}
	if d.OpenReconcileSession == nil {
		d.OpenReconcileSession = func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
			return imapx.OpenReconcileSession(ctx, ep, imapx.SessionOptions{})
		}
	}
	if d.OpenWriteConnection == nil {
		d.OpenWriteConnection = func(ctx context.Context, ep imapx.Endpoint) (*imapx.WriteConnection, error) {
			return imapx.OpenWriteConnection(ctx, ep, imapx.SessionOptions{})
		}
	}
	if d.OpenWatch == nil {
		d.OpenWatch = func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error) {
			return imapx.OpenWatchSession(ctx, ep, imapx.SessionOptions{})
		}
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.acquireConn == nil {
		d.acquireConn = liveness.Acquire
	}
	if d.profile == nil {
		d.profile = &profileCache{}
	}
	if d.vectorIndex == nil {
		d.vectorIndex = cmp.Or(d.VectorIndex, searchindex.NewVectorIndex())
	}
	if d.Resilience == nil {
		reg, err := outbound.NewRegistry(d.Config.Resilience, d.Logger, nil)
		if err != nil {
			return d, err
		}
		d.Resilience = reg
	}
	if d.Tokens == nil {
		tokens, err := mailoauth.NewSource(mailoauth.Options{Resolver: d.Resolver, Registry: d.Resilience, Logger: d.Logger})
		if err != nil {
			return d, err
		}
		d.Tokens = tokens
	}
	d.built = true
	return d, nil
}

// errNotBuilt is what a function taking Dependencies returns when they did
// not come from NewDependencies.
var errNotBuilt = errors.New("workers: the dependencies were not built with NewDependencies")

// Register adds every MailFathom worker to ws and returns the failure
// middleware the River client must install for all of them
// (jobqueue.Config.Middleware): it is where their failures are
// classified.
func Register(ws *river.Workers, deps Dependencies) (rivertype.WorkerMiddleware, error) {
	if ws == nil {
		return nil, errors.New("workers: a worker registry is required")
	}
	if !deps.built {
		return nil, errNotBuilt
	}
	// One set of write connections per process, shared by every worker.
	writes, stages, err := newMutationStages(deps)
	if err != nil {
		return nil, err
	}
	deps.writes, deps.stages = writes, stages
	if deps.gate, err = slots.NewGate(bounds(deps.Config)); err != nil {
		return nil, err
	}
	deps.resolutions = push.NewResolutions(deps.Pool, push.ResolutionPollPeriod)
	if deps.Stopping != nil {
		// The write connections end with the process.
		go func() {
			<-deps.Stopping
			writes.Close()
		}()
	}
	folder := failurePolicy{record: recordFolderFailure(deps), endsJob: true, throttle: recordThrottle(deps, false)}
	failures := &failureMiddleware{
		logger:   deps.Logger,
		deferral: deps.deferral,
		now:      deps.Now,
		policies: map[string]failurePolicy{
			jobs.AccountRun{}.Kind(): {record: recordRunFailure(deps), afterCancel: scheduleAfterFailure(deps),
				throttle: recordThrottle(deps, true)},
			jobs.FolderPass{}.Kind():      folder,
			jobs.ReconcileWindow{}.Kind(): folder,
			jobs.MutationStage{}.Kind():   {record: recordMutationFailure(deps), endsJob: true},
		},
	}
	// A carrier classifies a carried unit's failure as the unit's own
	// worker would have it (carry.go).
	deps.failures = failures
	river.AddWorker(ws, &AccountRunWorker{deps: deps})
	river.AddWorker(ws, &FolderPassWorker{deps: deps})
	river.AddWorker(ws, &ReconcileWindowWorker{deps: deps})
	river.AddWorker(ws, &ExtractionBackfillWorker{deps: deps})
	river.AddWorker(ws, &MutationStageWorker{deps: deps})
	river.AddWorker(ws, &WatchWorker{deps: deps})
	river.AddWorker(ws, &EmbedEmailWorker{deps: deps})
	river.AddWorker(ws, &EmbeddingBackfillWorker{deps: deps})
	river.AddWorker(ws, &VectorIndexWorker{deps: deps})
	return failures, nil
}

// watchLifetime is push.Lifetime, or what a test set.
func (d Dependencies) watchLifetime() time.Duration { return cmp.Or(d.lifetime, push.Lifetime) }

// deferral is the package's deferral, or what a test set.
func (d Dependencies) deferral() time.Duration {
	if d.deferrals != nil {
		return d.deferrals()
	}
	return deferral()
}

// gatePatience is how long a folder unit waits in the process for a
// concurrency bound before it snoozes: long enough that a unit of this
// process ends and lets it in.
const gatePatience = 10 * time.Second

// runGatePatience is how long an account run waits. It is longer: a run
// that waits keeps its place among the due accounts, which River hands out
// in the order they fell due, while one that snoozes comes back behind the
// next runs of accounts that already ran — with a thousand accounts and a
// round longer than the interval, the last accounts of the first round
// would wait for much of the second. It stays well inside the run's
// Timeout.
const runGatePatience = 2 * time.Minute

// enterGate lets a unit of account (and alias, for a folder unit) in to
// this process's share of the concurrency bounds, waiting at most patience
// for it, or until the process begins to stop; a unit that is not let in
// is deferred like one that meets a bound in PostgreSQL.
func (d Dependencies) enterGate(ctx context.Context, accountKey, alias string, patience time.Duration) (func(), error) {
	if d.gate == nil {
		return func() {}, nil
	}
	return d.gate.Enter(ctx, accountKey, alias, patience, d.Stopping)
}

// reportedDeferral is the snooze of a folder unit whose server reported a
// change when a concurrency bound is reached: short enough that a report
// is acted on within moments, jittered so units contending for one slot
// do not return in step.
func reportedDeferral() time.Duration {
	return 200*time.Millisecond + rand.N(600*time.Millisecond)
}

// deferral is the short, jittered snooze a work unit takes when a
// concurrency bound is reached or another run got to its rows first.
func deferral() time.Duration {
	return 2*time.Second + rand.N(8*time.Second)
}
