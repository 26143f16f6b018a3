package mutation

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// Collector exports the mailbox mutations that are not completed, read
// from the database at each scrape, so every replica reports the same
// figures:
//
//	mailfathom_mailbox_mutations_outstanding{kind,state}
//	mailfathom_mailbox_mutations_oldest_outstanding_age_seconds{kind,state}
//
// kind is move, copy, delete, mark-read or mark-unread; state is pending,
// converging or dead-lettered. Every combination is reported, 0 when none
// stands in it, so an alert on a dead-lettered change or an old pending
// one needs no absent() guard.
type Collector struct {
	q           mailstore.Querier
	now         func() time.Time
	outstanding *prometheus.Desc
	oldest      *prometheus.Desc
}

// NewCollector returns the collector over q.
func NewCollector(q mailstore.Querier) *Collector {
	return &Collector{
		q:   q,
		now: time.Now,
		outstanding: prometheus.NewDesc("mailfathom_mailbox_mutations_outstanding",
			"Mailbox mutations not completed, by kind and state (pending, converging, dead-lettered).",
			[]string{"kind", "state"}, nil),
		oldest: prometheus.NewDesc("mailfathom_mailbox_mutations_oldest_outstanding_age_seconds",
			"Seconds since the oldest mailbox mutation of the kind and state was recorded; 0 when there is none.",
			[]string{"kind", "state"}, nil),
	}
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
		kind  mailstore.MutationKind
		state mailstore.MutationState
	}
	byKey := make(map[key]mailstore.OutstandingMutations, len(groups))
	for _, g := range groups {
		byKey[key{g.Kind, g.State}] = g
	}
	now := c.now()
	for _, k := range outstandingKinds {
		for _, s := range outstandingStates {
			g := byKey[key{k, s}]
			age := 0.0
			if g.Count > 0 {
				age = max(now.Sub(g.Oldest).Seconds(), 0)
			}
			ch <- prometheus.MustNewConstMetric(c.outstanding, prometheus.GaugeValue, float64(g.Count), KindWord(k), StateWord(s))
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, KindWord(k), StateWord(s))
		}
	}
}
