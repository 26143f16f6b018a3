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
	ep, err := mailendpoint.Endpoint(ctx, account, d.endpointEnv())
	if err != nil {
		return nil, err
	}
	return mailsession.Open(ctx, d.Resilience, config.AccountKey(account.ID), operation, ep, d.OpenSession)
}
