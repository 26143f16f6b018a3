package mcpserver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts the tool calls:
//
//	mailfathom_mcp_tool_calls_total{tool,transport,outcome}
//	mailfathom_mcp_tool_call_duration_seconds{tool}
//
// tool is a tool's name, transport stdio or http, outcome ok, refused (a
// tool error the caller was told about) or failed. Nothing a caller asked
// for is a label.
type Metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailfathom_mcp_tool_calls_total",
			Help: "MCP tool calls, by tool, transport and outcome (ok, refused, failed).",
		}, []string{"tool", "transport", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailfathom_mcp_tool_call_duration_seconds",
			Help:    "How long MCP tool calls took, by tool.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"tool"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe counts one call; a nil m counts nothing.
func (m *Metrics) observe(tool, transport, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(tool, transport, outcome).Inc()
	m.duration.WithLabelValues(tool).Observe(d.Seconds())
}
