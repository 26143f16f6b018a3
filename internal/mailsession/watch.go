package mailsession

import (
	"context"
	"errors"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// WatchOpener opens a watching session to an endpoint;
// imapx.OpenWatchSession with the deployment's session options.
type WatchOpener func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error)

// OpenWatch establishes a watching session to ep under the
// MailboxSessionEstablishment pipeline of instance (the account key), the
// way Open establishes a read session: a session an abandoned or superseded
// attempt opened is shut without LOGOUT, and what survives the pipeline is
// translated (Establish). operation names the attempt in the pipeline's
// logs and metrics — a folder alias, or the watch's fixed operation name.
//
// The session comes back as itself. Its waits are not retrieval calls and
// run under no pipeline: a wait that fails is counted by the watch that
// holds the session (package push), which closes it and opens another, so
// OpenWatch neither examines a folder nor subscribes, and never recovers a
// session.
func OpenWatch(ctx context.Context, registry *resilience.Registry, instance, operation string, ep imapx.Endpoint, open WatchOpener) (*imapx.WatchSession, error) {
	if registry == nil || open == nil || instance == "" || operation == "" {
		return nil, errors.New("mailsession: a registry, an opener, an instance and an operation are required")
	}
	return Establish(ctx, registry, instance, operation, func(ctx context.Context) (*imapx.WatchSession, error) {
		return open(ctx, ep)
	}, (*imapx.WatchSession).Abandon)
}
