// Package outbound assembles MailFathom's outbound resilience: one
// resilience.Registry whose pipelines judge each dependency's failures by
// the rules of the adapter that talks to it — the IMAP adapter's for both
// mailbox classes, the database adapter's for PostgreSQL, and the HTTP
// status rules for authorization servers and AI providers.
//
// It is the one place that knows every adapter's classifier, so package
// resilience stays generic and no adapter imports another.
package outbound

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// Classifiers returns each protocol family's classifier.
func Classifiers() map[resilience.Family]resilience.Classifier {
	return map[resilience.Family]resilience.Classifier{
		resilience.FamilyMailbox:  mailsession.Classifier,
		resilience.FamilyDatabase: database.Classifier,
		resilience.FamilyProvider: resilience.ProviderClassifier{},
	}
}

// NewRegistry returns the registry every outbound call runs under, built
// from budgets (configuration's; nil means the defaults). logger receives
// the retry and circuit lines (nil discards them); the metrics are
// registered on registerer (nil registers none).
func NewRegistry(budgets map[resilience.DependencyClass]resilience.Budget, logger *slog.Logger, registerer prometheus.Registerer) (*resilience.Registry, error) {
	return resilience.NewRegistry(resilience.Options{
		Budgets:     budgets,
		Classifiers: Classifiers(),
		Logger:      logger,
		Registerer:  registerer,
	})
}
