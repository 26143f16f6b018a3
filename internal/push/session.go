package push

import (
	"context"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// open establishes a watching session under the account's
// MailboxSessionEstablishment pipeline, with the account's endpoint built
// and its secrets resolved afresh. operation names the attempt in the
// pipeline's logs and metrics. The watch's connection attempts are
// serialized, one at a time; open does not examine a folder or subscribe.
func (wt *watch) open(ctx context.Context, operation string) (*imapx.WatchSession, error) {
	ep, err := mailendpoint.Endpoint(ctx, wt.account, wt.opts.Env)
	if err != nil {
		return nil, err
	}
	key := resilience.Key{Class: resilience.MailboxSessionEstablishment, Instance: wt.key}
	wt.opening.Lock()
	defer wt.opening.Unlock()
	var sess *imapx.WatchSession
	err = wt.opts.Env.Registry.Execute(ctx, key, operation, func(ctx context.Context) error {
		s, err := wt.opts.Open(ctx, ep)
		if err != nil {
			return err
		}
		if sess != nil {
			_ = sess.Close()
		}
		sess = s
		return ctx.Err()
	})
	if err != nil {
		if sess != nil {
			_ = sess.Close()
		}
		return nil, err
	}
	return sess, nil
}
