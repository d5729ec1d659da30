package conversations

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cool-ai/beachd/envelope"
)

// Metrics are the conversations' Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	inbound *prometheus.CounterVec
	turns   *prometheus.CounterVec
	dead    *prometheus.CounterVec
	held    *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg:
// beachd_conversation_inbound_total{channel,disposition} (turn, held,
// rejected, ignored, unrouted, duplicate, approval),
// beachd_conversation_turns_total{channel,result} (started: a message
// reached the agent; answered; retry),
// beachd_conversation_turns_dead_total{channel} and
// beachd_conversation_held_total{channel,limit} (conversation, sender,
// agent: the flood limit that held a message).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		inbound: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_conversation_inbound_total",
			Help: "Inbound messages by channel and disposition (turn, held, rejected, ignored, unrouted, duplicate, approval)."},
			[]string{"channel", "disposition"}),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_conversation_turns_total",
			Help: "Conversation turns by channel and result: started (the agent took the message), answered, retry."},
			[]string{"channel", "result"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_conversation_turns_dead_total",
			Help: "Conversation turns dead-lettered (gave up, or a permanent agent error), by channel."}, []string{"channel"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_conversation_held_total",
			Help: "Inbound messages held by a flood limit, by channel and limit (conversation, sender, agent)."},
			[]string{"channel", "limit"}),
	}
	for _, c := range []prometheus.Collector{m.inbound, m.turns, m.dead, m.held} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func metricChannel(ch string) string {
	if spec, ok := envelope.Channel(ch); ok && spec.Inbound.Accepts {
		return ch
	}
	return "other"
}

func (m *Metrics) observeInbound(channel, disposition string) {
	if m != nil {
		m.inbound.WithLabelValues(metricChannel(channel), disposition).Inc()
	}
}

func (m *Metrics) observeTurn(channel, result string) {
	if m == nil {
		return
	}
	if result == "dead" {
		m.dead.WithLabelValues(metricChannel(channel)).Inc()
		return
	}
	m.turns.WithLabelValues(metricChannel(channel), result).Inc()
}

func (m *Metrics) observeHeld(channel, limit string) {
	if m != nil {
		m.held.WithLabelValues(metricChannel(channel), limit).Inc()
	}
}
