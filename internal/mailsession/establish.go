package mailsession

import (
	"context"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// Establish opens a session of any kind — read, reconciliation, watching or
// writing — under the MailboxSessionEstablishment pipeline of instance (the
// account key), and returns the one the last attempt opened. operation
// names the work in the pipeline's logs and metrics (a folder alias, or a
// fixed operation name) and is never taken from mail.
//
// open makes one attempt. A session an attempt opened after the pipeline
// had already abandoned it (its context ended) is given to abandon at once,
// and so is one an earlier attempt opened when a later attempt opens
// another: nobody will use either, and a logout is a command a server that
// stopped answering could hold past any budget. What survives the pipeline
// is translated as every mailbox call is: the caller's cancellation as it
// is, a terminal failure as itself, and a limit the pipeline imposed or a
// transient failure that survived every attempt as a
// *MailboxUnavailableError.
//
// Establish adds no retry of its own; the attempts are the pipeline's.
func Establish[S comparable](ctx context.Context, registry *resilience.Registry, instance, operation string, open func(context.Context) (S, error), abandon func(S)) (S, error) {
	var zero, opened S
	key := resilience.Key{Class: resilience.MailboxSessionEstablishment, Instance: instance}
	err := registry.Execute(ctx, key, operation, func(ctx context.Context) error {
		s, err := open(ctx)
		if err != nil {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			abandon(s)
			return cerr
		}
		if opened != zero {
			abandon(opened)
		}
		opened = s
		return nil
	})
	if err != nil {
		if opened != zero {
			abandon(opened)
		}
		return zero, translate(ctx, registry, resilience.MailboxSessionEstablishment, instance, operation, err)
	}
	return opened, nil
}

// translate maps what survived a pipeline of class onto the mailbox
// contract: a limit the pipeline imposed, or a transient failure that
// survived every attempt, is a *MailboxUnavailableError; the caller's
// cancellation and terminal failures pass through.
func translate(ctx context.Context, registry *resilience.Registry, class resilience.DependencyClass, instance, operation string, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if failure.IsDependencyUnavailable(err) || registry.Classify(class, err) == resilience.Transient {
		return &MailboxUnavailableError{Account: instance, Operation: operation, Err: err}
	}
	return err
}
