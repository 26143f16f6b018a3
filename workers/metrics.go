package workers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// RunCollector publishes the state of every configured account's runs and
// folders, read from PostgreSQL at scrape time (mailstore.RunStates), so
// the process keeps nothing per account and every replica reports the
// same figures. Labels are the configured account id and the folder alias,
// never anything taken from mail. An account no longer configured is not
// reported.
type RunCollector struct {
	deps Dependencies

	failures, backoff, messages, lastPass, lastSuccess *prometheus.Desc
}

// NewRunCollector returns a collector over deps' database and
// configuration.
func NewRunCollector(deps Dependencies) (*RunCollector, error) {
	deps, err := deps.withDefaults()
	if err != nil {
		return nil, err
	}
	return &RunCollector{
		deps: deps,
		failures: prometheus.NewDesc("mailfathom_account_consecutive_failures",
			"Failed runs in a row before the account's current run, counting its folders' failures; the current run's own failure included once it has failed.",
			[]string{"account"}, nil),
		backoff: prometheus.NewDesc("mailfathom_account_backoff_seconds",
			"The shortest wait before the account's next run as its failures stand: the interval when none failed.",
			[]string{"account"}, nil),
		messages: prometheus.NewDesc("mailfathom_folder_messages_total",
			"Messages the forward passes of a folder alias handled, by outcome: stored, oversized, unreadable, excluded_by_date, expunged_before_fetch, content_withheld.",
			[]string{"account", "alias", "outcome"}, nil),
		lastPass: prometheus.NewDesc("mailfathom_folder_last_pass_age_seconds",
			"Seconds since a forward pass of the folder alias last ran.",
			[]string{"account", "alias"}, nil),
		lastSuccess: prometheus.NewDesc("mailfathom_folder_last_success_age_seconds",
			"Seconds since a forward pass last walked the folder alias to its end: the figure to alert on.",
			[]string{"account", "alias"}, nil),
	}, nil
}

// Describe implements prometheus.Collector.
func (c *RunCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.failures, c.backoff, c.messages, c.lastPass, c.lastSuccess} {
		ch <- d
	}
}

// collectTimeout bounds the query of one scrape.
const collectTimeout = 5 * time.Second

// Collect implements prometheus.Collector. A database that does not answer
// in time yields no run metrics for that scrape, rather than a stalled one.
func (c *RunCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	accounts, folders, err := mailstore.RunStates(ctx, c.deps.Pool)
	if err != nil {
		return
	}
	cfg := c.deps.Config
	ids := map[string]string{}
	for _, a := range cfg.Accounts {
		ids[config.AccountKey(a.ID)] = a.ID
	}
	now := c.deps.Now()
	for _, st := range accounts {
		id, ok := ids[st.AccountKey]
		if !ok {
			continue
		}
		failures := st.ConsecutiveFailures
		if st.RunFailed {
			failures++
		}
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(failures), id)
		ch <- prometheus.MustNewConstMetric(c.backoff, prometheus.GaugeValue,
			MinRunBackoff(cfg.Sync.Interval, cfg.Sync.MaxFailureBackoff, failures).Seconds(), id)
	}
	for _, f := range folders {
		id, ok := ids[f.AccountKey]
		if !ok {
			continue
		}
		for outcome, n := range map[string]int{
			"stored": f.Counts.Stored, "oversized": f.Counts.Oversized, "unreadable": f.Counts.Unreadable,
			"excluded_by_date": f.Counts.ExcludedByDate, "expunged_before_fetch": f.Counts.ExpungedBeforeFetch,
			"content_withheld": f.Counts.Withheld,
		} {
			ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(n), id, f.Alias, outcome)
		}
		if f.LastPassAt != nil {
			ch <- prometheus.MustNewConstMetric(c.lastPass, prometheus.GaugeValue, now.Sub(*f.LastPassAt).Seconds(), id, f.Alias)
		}
		if f.LastSuccessAt != nil {
			ch <- prometheus.MustNewConstMetric(c.lastSuccess, prometheus.GaugeValue, now.Sub(*f.LastSuccessAt).Seconds(), id, f.Alias)
		}
	}
}
