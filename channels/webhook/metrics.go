package webhook

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exposes each endpoint's health to Prometheus.
type collector struct {
	d                           *Deliverer
	circuit, disabled, inflight *prometheus.Desc
}

// Collector returns a Prometheus collector of per-endpoint gauges:
// beachd_webhook_circuit_state (0 closed, 1 open, 2 half-open),
// beachd_webhook_endpoint_disabled (1 after a 410 until re-enabled) and
// beachd_webhook_in_flight (admitted attempts).
func (d *Deliverer) Collector() prometheus.Collector {
	l := []string{"endpoint"}
	return &collector{d: d,
		circuit:  prometheus.NewDesc("beachd_webhook_circuit_state", "Circuit breaker state per webhook endpoint: 0 closed, 1 open, 2 half-open.", l, nil),
		disabled: prometheus.NewDesc("beachd_webhook_endpoint_disabled", "1 when the endpoint answered 410 Gone and is disabled.", l, nil),
		inflight: prometheus.NewDesc("beachd_webhook_in_flight", "Admitted webhook attempts in flight per endpoint.", l, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.circuit
	ch <- c.disabled
	ch <- c.inflight
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	names := make([]string, 0, len(c.d.endpoints))
	for n := range c.d.endpoints {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st, _ := c.d.Status(n)
		dis := 0.0
		if st.Disabled {
			dis = 1
		}
		ch <- prometheus.MustNewConstMetric(c.circuit, prometheus.GaugeValue, float64(st.Breaker), n)
		ch <- prometheus.MustNewConstMetric(c.disabled, prometheus.GaugeValue, dis, n)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(st.InFlight), n)
	}
}
