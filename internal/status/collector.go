package status

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector publishes the Report as metrics, read from PostgreSQL at
// scrape time. Labels are the configured account id and folder alias.
type Collector struct {
	q    Querier
	opts Options

	failures, backoff, handled, messages, lastPass, lastSuccess *prometheus.Desc
	mutations, awaiting, refused                                *prometheus.Desc
	throttled, throttledFor, downloaded                         *prometheus.Desc
}

// NewCollector returns a collector reading q with opts.
func NewCollector(q Querier, opts Options) *Collector {
	return &Collector{
		q: q, opts: opts,
		failures: prometheus.NewDesc("mailfathom_account_consecutive_failures",
			"Failed runs in a row, counting the account's folders' failures; the current run's own failure included once it has failed.",
			[]string{"account"}, nil),
		backoff: prometheus.NewDesc("mailfathom_account_backoff_seconds",
			"The shortest wait before the account's next run as its failures stand: the interval when none failed.",
			[]string{"account"}, nil),
		handled: prometheus.NewDesc("mailfathom_folder_messages_total",
			"Messages the forward passes of a folder alias handled, by outcome: stored, oversized, unreadable, excluded_by_date, expunged_before_fetch, content_withheld.",
			[]string{"account", "alias", "outcome"}, nil),
		messages: prometheus.NewDesc("mailfathom_folder_stored_messages",
			"Messages stored of a folder alias now, by state: stored (served with content), oversized, content_withheld, tombstoned (gone from the server, kept, not served).",
			[]string{"account", "alias", "state"}, nil),
		lastPass: prometheus.NewDesc("mailfathom_folder_last_pass_age_seconds",
			"Seconds since a forward pass of the folder alias last ran.",
			[]string{"account", "alias"}, nil),
		lastSuccess: prometheus.NewDesc("mailfathom_folder_last_success_age_seconds",
			"Seconds since a forward pass last walked the folder alias to its end: the figure to alert on.",
			[]string{"account", "alias"}, nil),
		mutations: prometheus.NewDesc("mailfathom_folder_mailbox_mutations_outstanding",
			"Mailbox mutations not completed whose source is the folder alias, by state: pending, converging, dead-lettered.",
			[]string{"account", "alias", "state"}, nil),
		throttled: prometheus.NewDesc("mailfathom_account_throttled_total",
			"Throttling answers the account's server gave (a limit exceeded, a subsystem down), by reason: Unavailable, Limit, OverQuota, InUse, Throttled, RequestThrottled, BandwidthExceeded, TooManyConnections. None is a failure.",
			[]string{"account", "reason"}, nil),
		throttledFor: prometheus.NewDesc("mailfathom_account_throttled_seconds",
			"Seconds until the account's server throttle ends and its work asks the server again; 0 when it is not throttled.",
			[]string{"account"}, nil),
		downloaded: prometheus.NewDesc("mailfathom_account_download_window_bytes",
			"Message content the account downloaded within the daily download budget's rolling 24 hours; absent without a budget.",
			[]string{"account"}, nil),
		awaiting: prometheus.NewDesc("mailfathom_folder_messages_awaiting_vectors",
			"Served messages of the folder alias with a passage awaiting a vector under the active embedding profile; absent when no profile is configured.",
			[]string{"account", "alias"}, nil),
		refused: prometheus.NewDesc("mailfathom_folder_passages_refused",
			"Passages of the folder alias's served messages the provider refused under the active embedding profile; they do not await a vector until their text changes. Absent when no profile is configured.",
			[]string{"account", "alias"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.failures, c.backoff, c.handled, c.messages, c.lastPass, c.lastSuccess, c.mutations, c.awaiting,
		c.refused, c.throttled, c.throttledFor, c.downloaded} {
		ch <- d
	}
}

// collectTimeout bounds the queries of one scrape.
const collectTimeout = 5 * time.Second

// Collect implements prometheus.Collector. A database that does not answer
// in time yields no run metrics for that scrape, rather than a stalled one.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	r, err := Read(ctx, c.q, c.opts)
	if err != nil {
		return
	}
	for _, a := range r.Accounts {
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(a.ConsecutiveFailures), a.ID)
		ch <- prometheus.MustNewConstMetric(c.backoff, prometheus.GaugeValue, a.BackoffSeconds, a.ID)
		for reason, n := range a.Throttles {
			ch <- prometheus.MustNewConstMetric(c.throttled, prometheus.CounterValue, float64(n), a.ID, reason)
		}
		throttledFor := 0.0
		if a.Throttled != nil {
			throttledFor = a.Throttled.InSeconds
		}
		ch <- prometheus.MustNewConstMetric(c.throttledFor, prometheus.GaugeValue, throttledFor, a.ID)
		if b := a.DownloadBudget; b != nil {
			ch <- prometheus.MustNewConstMetric(c.downloaded, prometheus.GaugeValue, float64(b.UsedBytes), a.ID)
		}
		for _, f := range a.Folders {
			for _, outcome := range Outcomes {
				ch <- prometheus.MustNewConstMetric(c.handled, prometheus.CounterValue, float64(f.Handled[outcome]), a.ID, f.Alias, outcome)
			}
			for state, n := range map[string]int{
				"stored": f.Messages.Stored, "oversized": f.Messages.Oversized,
				"content_withheld": f.Messages.Withheld, "tombstoned": f.Messages.Tombstoned,
			} {
				ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(n), a.ID, f.Alias, state)
			}
			if f.LastPassAgeSeconds != nil {
				ch <- prometheus.MustNewConstMetric(c.lastPass, prometheus.GaugeValue, *f.LastPassAgeSeconds, a.ID, f.Alias)
			}
			if f.LastSuccessAgeSeconds != nil {
				ch <- prometheus.MustNewConstMetric(c.lastSuccess, prometheus.GaugeValue, *f.LastSuccessAgeSeconds, a.ID, f.Alias)
			}
			for _, state := range MutationStates {
				ch <- prometheus.MustNewConstMetric(c.mutations, prometheus.GaugeValue, float64(f.Mutations.ByState(state)), a.ID, f.Alias, state)
			}
			if f.AwaitingVectors != nil {
				ch <- prometheus.MustNewConstMetric(c.awaiting, prometheus.GaugeValue, float64(*f.AwaitingVectors), a.ID, f.Alias)
			}
			if f.RefusedPassages != nil {
				ch <- prometheus.MustNewConstMetric(c.refused, prometheus.GaugeValue, float64(*f.RefusedPassages), a.ID, f.Alias)
			}
		}
	}
}
