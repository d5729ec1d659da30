package approvals

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the approvals' Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	inbound    *prometheus.CounterVec
	injections *prometheus.CounterVec
	latency    prometheus.Histogram
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		inbound: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_approval_inbound_total",
			Help: "Inbound approval messages by channel and outcome (decided, wrong-sender, quarantined, …)."}, []string{"channel", "outcome"}),
		injections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_approval_injections_total",
			Help: "Injection attempts by result: done, retry, dead; returned: the decision of an approval asked through MCP, kept for its caller (no agent is called)."}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "beachd_approval_decision_to_injection_seconds",
			Help:    "Time from a decision to the agent accepting its approval-response.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
	}
	for _, c := range []prometheus.Collector{m.inbound, m.injections, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observeInbound(channel, outcome string) {
	switch channel {
	case "email", "sms", "whatsapp", "slack", "webhook", ChannelLink:
	default:
		channel = "other"
	}
	if m != nil {
		m.inbound.WithLabelValues(channel, outcome).Inc()
	}
}

func (m *Metrics) observeInjection(result string, decidedAt, now time.Time) {
	if m == nil {
		return
	}
	m.injections.WithLabelValues(result).Inc()
	if result == "done" {
		m.latency.Observe(now.Sub(decidedAt).Seconds())
	}
}
