package push

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are push synchronization's instruments. Their labels are the
// configured account identifier and the folder alias, both the operator's
// own names, never anything taken from a message or a remote folder path.
// A nil *Metrics records nothing.
type Metrics struct {
	mode          *prometheus.GaugeVec
	connections   *prometheus.GaugeVec
	notifications *prometheus.CounterVec
	latency       *prometheus.HistogramVec
}

// NewMetrics registers push synchronization's instruments with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mailfathom_push_folder_mode",
			Help: "1 for the mode (Push or Polling) a folder of a push account is synchronized in now, 0 for the other, by account and alias.",
		}, []string{"account", "alias", "mode"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mailfathom_push_watch_connections",
			Help: "Watching connections this process holds open, by account.",
		}, []string{"account"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailfathom_push_notifications_total",
			Help: "Changes the mail server reported in a watched folder, by account and alias.",
		}, []string{"account", "alias"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailfathom_push_notification_to_stored_seconds",
			Help:    "Time from a reported change to the end of the folder pass it started, by account.",
			Buckets: []float64{.1, .25, .5, 1, 2, 5, 10, 30, 60, 300},
		}, []string{"account"}),
	}
	for _, c := range []prometheus.Collector{m.mode, m.connections, m.notifications, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) setMode(account, alias, mode string) {
	if m == nil {
		return
	}
	for _, other := range []string{"Push", "Polling"} {
		v := 0.0
		if other == mode {
			v = 1
		}
		m.mode.WithLabelValues(account, alias, other).Set(v)
	}
}

func (m *Metrics) addConnections(account string, n int) {
	if m == nil {
		return
	}
	m.connections.WithLabelValues(account).Add(float64(n))
}

func (m *Metrics) notified(account, alias string) {
	if m == nil {
		return
	}
	m.notifications.WithLabelValues(account, alias).Inc()
}

// ObserveStored records d, the time from a reported change to the end of
// the folder pass it started, for account. The folder pass calls it; the
// watch never learns when a pass ends.
func (m *Metrics) ObserveStored(account string, d time.Duration) {
	if m == nil {
		return
	}
	m.latency.WithLabelValues(account).Observe(d.Seconds())
}
