package mutation

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// Collector exports the mailbox mutations that are not completed, per
// account, read from the database at each scrape, so every replica reports
// the same figures:
//
//	mailfathom_mailbox_mutations_outstanding{account,kind,state}
//	mailfathom_mailbox_mutations_oldest_outstanding_age_seconds{account,kind,state}
//
// account is the configured account identifier (the label of every other
// per-account metric); kind is move, copy, delete, mark-read or
// mark-unread; state is pending, converging or dead-lettered. Every
// combination is reported for every configured account, 0 when none stands
// in it, so an alert on a dead-lettered change or an old pending one needs
// no absent() guard. The changes of an account no longer configured are
// reported under the account key they were recorded with, for the groups
// that have any.
type Collector struct {
	q           mailstore.Querier
	accounts    []string          // the configured account identifiers, in order
	ids         map[string]string // account key → configured identifier
	now         func() time.Time
	outstanding *prometheus.Desc
	oldest      *prometheus.Desc
}

// NewCollector returns the collector over q for cfg's accounts.
func NewCollector(q mailstore.Querier, cfg *config.Config) *Collector {
	c := &Collector{
		q:   q,
		ids: map[string]string{},
		now: time.Now,
		outstanding: prometheus.NewDesc("mailfathom_mailbox_mutations_outstanding",
			"Mailbox mutations not completed, by account, kind and state (pending, converging, dead-lettered).",
			[]string{"account", "kind", "state"}, nil),
		oldest: prometheus.NewDesc("mailfathom_mailbox_mutations_oldest_outstanding_age_seconds",
			"Seconds since the oldest mailbox mutation of the account, kind and state was recorded; 0 when there is none.",
			[]string{"account", "kind", "state"}, nil),
	}
	if cfg != nil {
		for _, a := range cfg.Accounts {
			c.accounts = append(c.accounts, a.ID)
			c.ids[config.AccountKey(a.ID)] = a.ID
		}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.outstanding
	ch <- c.oldest
}

// collectTimeout bounds the query of one scrape.
const collectTimeout = 5 * time.Second

var (
	outstandingKinds = []mailstore.MutationKind{mailstore.MutationRelocate, mailstore.MutationCopy, mailstore.MutationDelete,
		mailstore.MutationMarkRead, mailstore.MutationMarkUnread}
	outstandingStates = []mailstore.MutationState{mailstore.MutationPending, mailstore.MutationConverging, mailstore.MutationDeadLettered}
)

// Collect implements prometheus.Collector. A database that does not answer
// in time yields no mutation metrics for that scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	groups, err := mailstore.CountOutstandingMutations(ctx, c.q)
	if err != nil {
		return
	}
	type key struct {
		account string
		kind    mailstore.MutationKind
		state   mailstore.MutationState
	}
	byKey := make(map[key]mailstore.OutstandingMutations, len(groups))
	now := c.now()
	emit := func(account string, g mailstore.OutstandingMutations) {
		age := 0.0
		if g.Count > 0 {
			age = max(now.Sub(g.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.outstanding, prometheus.GaugeValue, float64(g.Count), account, KindWord(g.Kind), StateWord(g.State))
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, account, KindWord(g.Kind), StateWord(g.State))
	}
	for _, g := range groups {
		if _, configured := c.ids[g.AccountKey]; !configured {
			emit(g.AccountKey, g)
			continue
		}
		byKey[key{g.AccountKey, g.Kind, g.State}] = g
	}
	for _, id := range c.accounts {
		k := config.AccountKey(id)
		for _, kind := range outstandingKinds {
			for _, state := range outstandingStates {
				g, ok := byKey[key{k, kind, state}]
				if !ok {
					g = mailstore.OutstandingMutations{AccountKey: k, Kind: kind, State: state}
				}
				emit(id, g)
			}
		}
	}
}
