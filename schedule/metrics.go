package schedule

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the scheduler's Prometheus series, labelled by schedule.
type metrics struct {
	runs     *prometheus.CounterVec   // outcome: succeeded, failed, skipped, missed
	lastRun  *prometheus.GaugeVec     // unix seconds of the last finished run
	nextRun  *prometheus.GaugeVec     // unix seconds of the next slot
	duration *prometheus.HistogramVec // seconds from start to finish of a run
	running  *prometheus.GaugeVec     // 1 while a run is in progress
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "beachd", Subsystem: "schedule",
			Name: "runs_total", Help: "Schedule slots by outcome: succeeded, failed, skipped (overlap), missed (downtime)."},
			[]string{"schedule", "outcome"}),
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "beachd", Subsystem: "schedule",
			Name: "last_run_timestamp_seconds", Help: "When the schedule's last run finished (Unix seconds)."},
			[]string{"schedule"}),
		nextRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "beachd", Subsystem: "schedule",
			Name: "next_run_timestamp_seconds", Help: "The schedule's next slot (Unix seconds)."},
			[]string{"schedule"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "beachd", Subsystem: "schedule",
			Name: "run_duration_seconds", Help: "Duration of schedule runs, all attempts included.",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800}},
			[]string{"schedule"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "beachd", Subsystem: "schedule",
			Name: "running", Help: "1 while the schedule has a run in progress."},
			[]string{"schedule"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.runs, m.lastRun, m.nextRun, m.duration, m.running} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register schedule metrics: %w", err)
		}
	}
	return m, nil
}
