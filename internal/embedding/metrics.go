package embedding

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/jobs"
)

// Offer outcomes, the values of the outcome label of
// mailfathom_embedding_offered_messages_total.
const (
	OfferAccepted = "accepted"
	OfferRefused  = "refused"
)

// Metrics are the embedding instruments. A nil *Metrics records nothing.
// Their labels are fixed vocabulary, never text, a URL or a key.
type Metrics struct {
	offered  *prometheus.CounterVec
	embedded prometheus.Counter
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the instruments on reg (nil registers none).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		offered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailfathom_embedding_offered_messages_total",
			Help: "Messages a folder pass offered for embedding, by outcome: accepted (an embed job was inserted with them) or refused (the backlog was full; the embedding backfill offers them later).",
		}, []string{"outcome"}),
		embedded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mailfathom_embedding_passages_embedded_total",
			Help: "Passages embedded and stored under the active profile; its rate is embeddings per second.",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailfathom_embedding_provider_request_duration_seconds",
			Help:    "Duration of one embedding provider request (one attempt), by outcome: ok or failed.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"outcome"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.offered, m.embedded, m.latency} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Offered counts n messages offered with outcome.
func (m *Metrics) Offered(outcome string, n int) {
	if m != nil {
		m.offered.WithLabelValues(outcome).Add(float64(n))
	}
}

// Embedded counts n passages embedded and stored.
func (m *Metrics) Embedded(n int) {
	if m != nil {
		m.embedded.Add(float64(n))
	}
}

func (m *Metrics) request(d time.Duration, err error) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	m.latency.WithLabelValues(outcome).Observe(d.Seconds())
}

// backlogCountCap bounds the backlog depth the collector counts, so a
// scrape never walks an unbounded queue.
const backlogCountCap = 1_000_000

// Collector reports, at each scrape, the embedding backlog's depth
// (available jobs on the embeddings queue), and per recorded profile the
// messages awaiting vectors and the passages the provider refused.
type Collector struct {
	pool     *pgxpool.Pool
	backlog  *prometheus.Desc
	awaiting *prometheus.Desc
	refused  *prometheus.Desc
}

// NewCollector returns a Collector reading pool.
func NewCollector(pool *pgxpool.Pool) *Collector {
	return &Collector{
		pool: pool,
		backlog: prometheus.NewDesc("mailfathom_embedding_backlog_jobs",
			"Embed jobs waiting to run on the embeddings queue; offers are refused at MAILFATHOM_EMBEDDING_MAX_BACKLOG.", nil, nil),
		awaiting: prometheus.NewDesc("mailfathom_embedding_messages_awaiting_vectors",
			"Served messages with a passage that has no vector under the profile, per recorded embedding profile (its id, model and dimensions: configured names, never mail).",
			[]string{"profile", "model", "dimensions"}, nil),
		refused: prometheus.NewDesc("mailfathom_embedding_passages_refused",
			"Passages of served messages the provider refused for good (400, 413 or 422 to a request of the passage alone), per recorded embedding profile; they do not await a vector and are offered again only once their text changes.",
			[]string{"profile", "model", "dimensions"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.backlog
	ch <- c.awaiting
	ch <- c.refused
}

// Collect implements prometheus.Collector. A failed query leaves its
// metric out of this scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := jobqueue.AvailableJobs(ctx, c.pool, jobs.QueueEmbeddings, jobs.EmbedEmail{}.Kind(), backlogCountCap); err == nil {
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(n))
	}
	profiles, err := searchindex.AwaitingPerProfile(ctx, c.pool)
	if err != nil {
		return
	}
	for _, p := range profiles {
		labels := []string{strconv.Itoa(int(p.ProfileID)), p.Model, strconv.Itoa(p.Dimensions)}
		ch <- prometheus.MustNewConstMetric(c.awaiting, prometheus.GaugeValue, float64(p.Awaiting), labels...)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.GaugeValue, float64(p.Refused), labels...)
	}
}
