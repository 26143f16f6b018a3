package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/jobs"
)

// SecretsError reports every configured secret reference that did not
// resolve at startup, each by its variable and failure identity, never by
// its material.
type SecretsError struct {
	Problems []string
}

func (e *SecretsError) Error() string {
	return "secret references that do not resolve:\n" + strings.Join(e.Problems, "\n")
}

// LoadedAnchor is a trust anchor startup loaded: public facts only.
type LoadedAnchor struct {
	AccountID, Subject, Fingerprint string
}

// CheckSecrets resolves every secret reference in cfg once (the database
// and UI passwords, each password account's password, each token account's
// OAuth client ID, client secret and refresh token, and the trust-anchor
// references), loads every configured trust anchor, and reports all
// failures together, each by its variable and failure identity. It is run
// before anything starts, so no run ever begins against a reference that
// cannot resolve or an anchor that does not load; the material read here is
// wiped at once, and every later use resolves again. Accounts are checked
// whether or not synchronization is enabled. No token is requested here:
// an authorization server's availability is a run's concern, not startup's.
func CheckSecrets(ctx context.Context, cfg *config.Config, resolver *secret.Resolver) ([]LoadedAnchor, error) {
	var problems []string
	for _, ref := range cfg.SecretReferences() {
		material, err := resolver.Resolve(ctx, ref.Ref)
		clear(material)
		if err != nil {
			// The secret's own reason says which — missing, not
			// readable, empty — and never carries the target or material.
			var serr *secret.Error
			identity, reason := string(secret.SecretNotResolvable), ""
			if errors.As(err, &serr) {
				identity, reason = string(serr.Failure), ": "+serr.Reason
			}
			problems = append(problems, failure.Text(ref.Variable+": the secret reference does not resolve"+reason, identity))
		}
	}
	var anchors []LoadedAnchor
	for i, a := range cfg.Accounts {
		if a.TransportSecurity.CertificateTrust != config.AdditionalTrustedAuthority {
			continue
		}
		anchor, err := mailendpoint.LoadAnchor(ctx, a, cfg.SecretInterpretationMode, resolver)
		if err != nil {
			// A *trustanchor.LoadError names its failure in brackets and
			// carries no material.
			problems = append(problems, fmt.Sprintf("%sACCOUNTS_%d_TRUSTED_CERTIFICATE_AUTHORITY: %v", config.Prefix, i, err))
			continue
		}
		anchors = append(anchors, LoadedAnchor{AccountID: a.ID, Subject: anchor.Subject(), Fingerprint: anchor.Fingerprint()})
	}
	if len(problems) > 0 {
		return nil, &SecretsError{Problems: problems}
	}
	return anchors, nil
}

// OptionsFromConfig maps a validated configuration onto Run's options. The
// console, the Listening hook and the logger are the caller's.
func OptionsFromConfig(cfg *config.Config, resolver *secret.Resolver) Options {
	q := cfg.EffectiveQueueWorkers()
	opts := Options{
		DatabaseMaxConns: int32(cfg.Database.MaxConnections),
		EmbeddedDataDir:  cfg.Database.EmbeddedDataDir,
		HTTPAddr:         cfg.HTTP.Addr,
		UIEnabled:        cfg.UI.Enabled,
		UIUsername:       cfg.UI.Username,
		MigrateOnStart:   cfg.MigrateOnStart,
		QueueWorkers: map[string]int{
			jobs.QueueAccounts:  q.Accounts,
			jobs.QueueFolders:   q.Folders,
			jobs.QueueBackfill:  q.Backfill,
			jobs.QueueMutations: q.Mutations,
			jobs.QueueWatches:   q.Watches,
		},
		ShutdownDrain: cfg.Sync.ShutdownDrainTimeout,
		AccountCount:  len(cfg.Accounts),
		Config:        cfg,
		Resolver:      resolver,
	}
	if cfg.Embedding.Configured() {
		// The embeddings queue is worked only with a profile: without one
		// nothing is offered, and an embed job left from an earlier profile
		// waits for the next.
		opts.QueueWorkers[jobs.QueueEmbeddings] = q.Embeddings
		// One step of the vector index at a time: each hands over to the
		// next, and a build uses every core in its training.
		opts.QueueWorkers[jobs.QueueVectorIndex] = 1
	}
	if !cfg.Database.Embedded() {
		opts.DatabaseConnString = cfg.Database.ConnString()
	}
	if ref := cfg.Database.Password; !ref.IsZero() {
		opts.DatabasePassword = func(ctx context.Context) ([]byte, error) { return resolver.Resolve(ctx, ref) }
	}
	if ref := cfg.UI.Password; !ref.IsZero() {
		opts.UIPassword = func(ctx context.Context) ([]byte, error) { return resolver.Resolve(ctx, ref) }
	}
	return opts
}
