package api

import (
	"context"
	"sync"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are beachd's core Prometheus metrics. It implements
// channels.Observer.
type Metrics struct {
	ingested       *prometheus.CounterVec
	handedOff      *prometheus.CounterVec
	rejected       prometheus.Counter
	attempts       *prometheus.CounterVec
	delivered      *prometheus.CounterVec
	attemptSeconds *prometheus.HistogramVec
	latency        *prometheus.HistogramVec
	ingestSeconds  prometheus.Histogram
}

var _ channels.Observer = (*Metrics)(nil)

// NewMetrics registers the metrics on reg, with a queue-depth collector
// reading db (cached for a few seconds so scrapes stay cheap).
func NewMetrics(reg prometheus.Registerer, db StateCounter) (*Metrics, error) {
	m := &Metrics{
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_ingested_deliveries_total",
			Help: "Deliveries accepted at ingest, by channel."}, []string{"channel"}),
		handedOff: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_handed_off_total",
			Help: "Deliveries handed from ingest straight to a dispatch worker (stored leased, no claim), by channel."}, []string{"channel"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "beachd_ingest_rejected_total",
			Help: "Delivery requests rejected at ingest."}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_delivery_attempts_total",
			Help: "Delivery attempts by channel and outcome (sent, retry, dead)."}, []string{"channel", "outcome"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "beachd_delivered_total",
			Help: "Deliveries the provider accepted, by channel."}, []string{"channel"}),
		attemptSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "beachd_attempt_duration_seconds",
			Help: "Duration of one delivery attempt.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12)}, []string{"channel"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "beachd_delivery_latency_seconds",
			Help: "From acceptance to the provider's acceptance.", Buckets: prometheus.ExponentialBuckets(0.001, 3, 14)}, []string{"channel"}),
		ingestSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "beachd_ingest_duration_seconds",
			Help: "Time to accept a delivery request, including the fsync.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
	for _, c := range []prometheus.Collector{m.ingested, m.handedOff, m.rejected, m.attempts, m.delivered, m.attemptSeconds, m.latency, m.ingestSeconds, &depthCollector{db: db}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Ingested counts accepted deliveries, and those handed off (stored
// leased, in state sending).
func (m *Metrics) Ingested(ds []*store.Delivery) {
	for _, d := range ds {
		m.ingested.WithLabelValues(d.Channel).Inc()
		if d.State == store.StateSending {
			m.handedOff.WithLabelValues(d.Channel).Inc()
		}
	}
}

// Attempted implements channels.Observer.
func (m *Metrics) Attempted(channel, outcome string, took time.Duration) {
	m.attempts.WithLabelValues(channel, outcome).Inc()
	m.attemptSeconds.WithLabelValues(channel).Observe(took.Seconds())
}

// Delivered implements channels.Observer.
func (m *Metrics) Delivered(channel string, since time.Duration) {
	m.delivered.WithLabelValues(channel).Inc()
	m.latency.WithLabelValues(channel).Observe(since.Seconds())
}

// StateCounter counts deliveries by state, for the queue-depth metric.
// Every store.Deliveries is one.
type StateCounter interface {
	CountByState(ctx context.Context) (map[store.State]int, error)
}

var depthDesc = prometheus.NewDesc("beachd_queue_depth", "Deliveries by state.", []string{"state"}, nil)

type depthCollector struct {
	db     StateCounter
	mu     sync.Mutex
	at     time.Time
	counts map[store.State]int
}

func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- depthDesc }

func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) > 5*time.Second || c.counts == nil {
		if counts, err := c.db.CountByState(context.Background()); err == nil {
			c.counts, c.at = counts, time.Now()
		}
	}
	counts := c.counts
	c.mu.Unlock()
	for _, st := range store.States {
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}
