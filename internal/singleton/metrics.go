package singleton

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	heldDesc = prometheus.NewDesc("beachd_singleton_held",
		"1 while this replica holds the singleton's lease (and runs it), else 0.", []string{"name"}, nil)
	generationDesc = prometheus.NewDesc("beachd_singleton_generation",
		"The fencing generation of the singleton's lease this replica holds; 0 while it holds none.", []string{"name"}, nil)
)

// collector reports every singleton Run was called for.
type collector struct{ r *Runner }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- heldDesc
	ch <- generationDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for name, s := range c.r.known() {
		held, gen := 0.0, 0.0
		if s.held {
			held, gen = 1, float64(s.gen)
		}
		ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, held, name)
		ch <- prometheus.MustNewConstMetric(generationDesc, prometheus.GaugeValue, gen, name)
	}
}

// Register adds the runner's series to reg: beachd_singleton_held{name}
// (0 or 1) and beachd_singleton_generation{name}.
func (r *Runner) Register(reg prometheus.Registerer) error {
	if err := reg.Register(collector{r}); err != nil {
		return fmt.Errorf("register singleton metrics: %w", err)
	}
	return nil
}
