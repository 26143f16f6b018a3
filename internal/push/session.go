package push

import (
	"context"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailsession"
)

// open establishes a watching session (mailsession.OpenWatch) with the
// account's endpoint built and its secrets resolved afresh. operation
// names the attempt in the pipeline's logs and metrics. The watch's
// connection attempts are serialized, one at a time: per-folder sessions
// opened all at once would exceed the establishment pipeline's concurrency
// limit, which rejects rather than queues. open does not examine a folder
// or subscribe.
func (wt *watch) open(ctx context.Context, operation string) (*imapx.WatchSession, error) {
	ep, err := mailendpoint.Endpoint(ctx, wt.account, wt.opts.Env)
	if err != nil {
		return nil, err
	}
	wt.opening.Lock()
	defer wt.opening.Unlock()
	if err := wt.awaitThrottle(ctx); err != nil {
		return nil, err
	}
	return mailsession.OpenWatch(ctx, wt.opts.Env.Registry, wt.key, operation, ep, wt.opts.Open)
}
