package push

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// ResolutionPollPeriod is how often Resolutions reads the resolutions
// versions of the accounts a process watches: how soon after an account
// run resolved other folders — a repointed alias, a folder deleted on the
// server — their watch follows it.
const ResolutionPollPeriod = 5 * time.Second

// Resolutions tells a process's watches that an account run resolved
// their account's folders differently from the run before
// (mailstore.RecordResolutions moved the account's resolutions version).
//
// It reads the version of every account a watch follows in one statement
// per period (mailstore.ResolutionVersions), however many there are: a
// thousand push accounts cost one small query every few seconds, not a
// thousand, and no connection is held between polls, which a LISTEN would
// need. Polling stops while no watch follows anything. A poll that fails
// is simply tried again at the next period; a watch also reads its folders
// afresh whenever it connects.
type Resolutions struct {
	pool   *pgxpool.Pool
	period time.Duration

	mu        sync.Mutex
	followers map[*follower]struct{}
	cancel    context.CancelFunc // set while polling
}

// follower is one watch following one account.
type follower struct {
	key     string
	version int64
	changed chan struct{}
}

// NewResolutions returns a Resolutions that reads pool every period.
func NewResolutions(pool *pgxpool.Pool, period time.Duration) *Resolutions {
	return &Resolutions{pool: pool, period: period, followers: map[*follower]struct{}{}}
}

// follow starts following accountKey's resolutions, known at version: the
// channel receives, coalesced, whenever a poll finds another version.
// stop ends the following.
func (r *Resolutions) follow(accountKey string, version int64) (changed <-chan struct{}, stop func()) {
	f := &follower{key: accountKey, version: version, changed: make(chan struct{}, 1)}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.followers[f] = struct{}{}
	if r.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go r.poll(ctx)
	}
	return f.changed, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.followers, f)
		if len(r.followers) == 0 && r.cancel != nil {
			r.cancel()
			r.cancel = nil
		}
	}
}

func (r *Resolutions) poll(ctx context.Context) {
	t := time.NewTicker(r.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		var keys []string
		seen := map[string]bool{}
		for f := range r.followers {
			if !seen[f.key] {
				seen[f.key] = true
				keys = append(keys, f.key)
			}
		}
		r.mu.Unlock()
		qctx, cancel := context.WithTimeout(ctx, r.period)
		versions, err := mailstore.ResolutionVersions(qctx, r.pool, keys)
		cancel()
		if err != nil {
			continue
		}
		r.mu.Lock()
		for f := range r.followers {
			if v, ok := versions[f.key]; ok && v != f.version {
				f.version = v
				select {
				case f.changed <- struct{}{}:
				default:
				}
			}
		}
		r.mu.Unlock()
	}
}
