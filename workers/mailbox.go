package workers

import (
	"context"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailsession"
)

// openMailbox builds account's endpoint — loading its trust anchor afresh,
// so a replaced anchor reaches the next work unit — and establishes a
// read-only session under the account's resilience pipelines. operation is
// the folder alias the unit works on, or resilience.OperationFolderDiscovery.
func (d Dependencies) openMailbox(ctx context.Context, account config.Account, operation string) (*mailsession.Session, error) {
	return d.openWith(ctx, account, operation, d.OpenSession)
}

// openReconciliation is openMailbox for a reconciliation window: a session
// of OpenReconcileSession, whose one connection examines the folder and
// asks about flags and existence, so a window costs the server one login,
// not two.
func (d Dependencies) openReconciliation(ctx context.Context, account config.Account, alias string) (*mailsession.Session, error) {
	return d.openWith(ctx, account, alias, d.OpenReconcileSession)
}

func (d Dependencies) openWith(ctx context.Context, account config.Account, operation string, open mailsession.Opener) (*mailsession.Session, error) {
	ep, err := mailendpoint.Endpoint(ctx, account, d.endpointEnv())
	if err != nil {
		return nil, err
	}
	return mailsession.Open(ctx, d.Resilience, config.AccountKey(account.ID), operation, ep, open)
}
