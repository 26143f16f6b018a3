package jobqueue

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Metrics counts job attempts by kind, queue and outcome and times them.
// Labels are job kinds and queue names, which are fixed identifiers, never
// anything taken from a job's arguments.
type Metrics struct {
	river.MiddlewareDefaults
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var _ rivertype.WorkerMiddleware = (*Metrics)(nil)

// NewMetrics registers the job instruments with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailfathom_job_attempts_total",
			Help: "Job attempts worked by this process, by job kind, queue and outcome (completed, cancelled, snoozed, failed).",
		}, []string{"kind", "queue", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailfathom_job_duration_seconds",
			Help:    "Duration of job attempts worked by this process, by job kind and queue.",
			Buckets: []float64{.005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900},
		}, []string{"kind", "queue"}),
	}
	for _, c := range []prometheus.Collector{m.attempts, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Work implements rivertype.WorkerMiddleware.
func (m *Metrics) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	start := time.Now()
	err := doInner(ctx)
	m.duration.WithLabelValues(job.Kind, job.Queue).Observe(time.Since(start).Seconds())
	m.attempts.WithLabelValues(job.Kind, job.Queue, Outcome(err)).Inc()
	return err
}
