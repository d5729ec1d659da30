package main

import (
	"bytes"
	"fmt"
)

// Goals against the queued relay (relay.go), measured in the same run: the
// relay is what HTTP in, HTTP out costs on this machine with nothing
// stored, so these say how much beachd's durability costs on top. Those
// against River (river.go) say whether beachd on PostgreSQL keeps up with a
// general-purpose job queue on the same database.
const (
	goalDeliveredVsRelay = 0.5  // beachd delivered/s ÷ queued relay delivered/s, at least
	goalIngestVsRelay    = 0.8  // beachd acknowledged ingest/s ÷ queued relay ingest/s, at least
	goalCPUVsRelay       = 2.0  // beachd CPU per envelope ÷ queued relay's, at most
	goalIngestVsRiver    = 1.0  // PostgreSQL, one replica: ingest/s ÷ River's, at least
	goalDeliveredVsRiver = 1.0  // PostgreSQL, one replica: delivered/s ÷ River's, at least
	goalThreeVsOne       = 0.9  // PostgreSQL: three replicas' delivered/s ÷ one replica's, at least
	goalBytesPerQueued   = 1024 // with -scale: store file bytes per queued delivery, at most
	goalSteadyRate       = 2000 // envelopes/s offered for the latency goal
	goalSteadyP99ms      = 50   // ingest→delivered p99 at goalSteadyRate, at most
	goalStartupMs        = 1000 // start-up to /readyz with the -scale backlog, at most
	goalAnonRSSMiB       = 150  // anonymous RSS at ready with the -scale backlog, at most
)

// goal is one figure beside its goal.
type goal struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Op     string  `json:"op"` // ">=" or "<="
	Target float64 `json:"goal"`
	Met    bool    `json:"met"`
	// Figures are the raw figures the value comes from.
	Figures string `json:"figures"`
	// Note says why a figure that looks met is not counted as met, or what
	// else qualifies it.
	Note string `json:"note,omitempty"`
}

func atLeast(name string, v, target float64, unit, figures string) goal {
	return goal{Name: name, Value: v, Unit: unit, Op: ">=", Target: target, Met: v >= target, Figures: figures}
}

func atMost(name string, v, target float64, unit, figures string) goal {
	return goal{Name: name, Value: v, Unit: unit, Op: "<=", Target: target, Met: v <= target, Figures: figures}
}

// goals compares what was measured with the goals; a section that did not
// run gives no rows.
func goals(t *result, st *steadyResult, sc *scaleResult, be *backendsResult) []goal {
	var gs []goal
	if t != nil && t.Queued != nil && t.Queued.Delivered > 0 && t.Queued.Ingest > 0 {
		q := t.Queued
		gs = append(gs,
			atLeast("beachd delivered/s ÷ queued relay delivered/s", t.DeliveryRate/q.Delivered, goalDeliveredVsRelay, "×",
				fmt.Sprintf("beachd %.0f/s, queued relay %.0f/s (%d envelopes, %d clients)", t.DeliveryRate, q.Delivered, t.N, t.C)),
			atLeast("beachd acknowledged ingest/s ÷ queued relay ingest/s", t.IngestRate/q.Ingest, goalIngestVsRelay, "×",
				fmt.Sprintf("beachd %.0f/s, queued relay %.0f/s", t.IngestRate, q.Ingest)))
		if q.CPUPerEnvelopeUs > 0 {
			gs = append(gs, atMost("CPU per envelope: beachd ÷ queued relay", t.CPUPerEnvelopeUs/q.CPUPerEnvelopeUs, goalCPUVsRelay, "×",
				fmt.Sprintf("beachd %.0f µs, queued relay %.0f µs (user + system, /proc)", t.CPUPerEnvelopeUs, q.CPUPerEnvelopeUs)))
		}
	}
	if st != nil {
		g := atMost(fmt.Sprintf("ingest→delivered p99 at a steady %d envelopes/s offered", st.Rate), st.E2EP99ms, goalSteadyP99ms, "ms",
			fmt.Sprintf("p50 %.1f, p90 %.1f, p99 %.1f, max %.1f ms; offered %.0f/s of %d/s for %s, %d late sends, %d accepted, %d delivered, %d errors",
				st.E2EP50ms, st.E2EP90ms, st.E2EP99ms, st.E2EMaxms, st.OfferedRate, st.Rate, st.Duration, st.Late, st.Accepted, st.Delivered, st.Errors))
		switch {
		case st.Rate != goalSteadyRate:
			g.Met = false
			g.Note = fmt.Sprintf("the goal is stated at %d/s; this run offered %d/s", goalSteadyRate, st.Rate)
		case st.OfferedRate < 0.95*float64(st.Rate):
			g.Met = false
			g.Note = fmt.Sprintf("not counted: the sender offered only %.0f/s", st.OfferedRate)
		case st.Errors > 0 || st.Undelivered > 0:
			g.Met = false
			g.Note = fmt.Sprintf("not counted: %d errors, %d undelivered", st.Errors, st.Undelivered)
		}
		if st.Late > 0 && g.Note == "" {
			g.Note = fmt.Sprintf("%d of %d sends started more than %.0f ms late (worst %.1f ms); p99 from the scheduled moment %.1f ms",
				st.Late, st.Sent, st.LateAfterMs, st.MaxLateMs, st.E2EFromScheduleP99ms)
		}
		gs = append(gs, g)
	}
	if sc != nil {
		gs = append(gs,
			atMost(fmt.Sprintf("start-up to /readyz with %d queued deliveries", sc.Queued), sc.StartupMs, goalStartupMs, "ms",
				fmt.Sprintf("store file %.0f MiB; restart after draining %.0f ms", sc.FileMiB, sc.RestartMs)),
			atMost(fmt.Sprintf("anonymous RSS at ready with %d queued deliveries", sc.Queued), sc.AnonAtReadyMiB, goalAnonRSSMiB, "MiB",
				fmt.Sprintf("total RSS %.1f MiB (the rest is bbolt's file map); anonymous %.1f MiB after delivering from the backlog", sc.RSSAtReadyMiB, sc.AnonPeakMiB)))
		if sc.Queued > 0 {
			gs = append(gs, atMost(fmt.Sprintf("store bytes per queued delivery (%d queued)", sc.Queued), sc.FileMiB*(1<<20)/float64(sc.Queued), goalBytesPerQueued, "bytes",
				fmt.Sprintf("bbolt file %.0f MiB", sc.FileMiB)))
		}
	}
	if be != nil && be.VsRiver != nil {
		v, pg1, pg3, rv := be.VsRiver, be.run("postgres", 1), be.run("postgres", 3), be.run("river", 1)
		gs = append(gs,
			atLeast("PostgreSQL, 1 replica: beachd ingest/s ÷ River ingest/s", v.Ingest, goalIngestVsRiver, "×",
				fmt.Sprintf("beachd %.0f/s, River %.0f/s (%d envelopes, %d clients)", pg1.IngestRate, rv.IngestRate, be.N, be.C)),
			atLeast("PostgreSQL, 1 replica: beachd delivered/s ÷ River delivered/s", v.Delivered, goalDeliveredVsRiver, "×",
				fmt.Sprintf("beachd %.0f/s, River %.0f/s; CPU per envelope with PostgreSQL's: beachd %.0f + %.0f µs, River %.0f + %.0f µs (%.2f×)",
					pg1.DeliveryRate, rv.DeliveryRate, pg1.CPUPerEnvelopeUs, pg1.PostgresCPUPerEnvelopeUs, rv.CPUPerEnvelopeUs, rv.PostgresCPUPerEnvelopeUs, v.CPU)))
		if pg3 != nil {
			g := atLeast("PostgreSQL: 3 replicas' delivered/s ÷ 1 replica's, on one database", v.ThreeReplicas, goalThreeVsOne, "×",
				fmt.Sprintf("3 replicas %.0f/s, 1 replica %.0f/s; CPU per envelope with PostgreSQL's %.0f + %.0f µs against %.0f + %.0f µs",
					pg3.DeliveryRate, pg1.DeliveryRate, pg3.CPUPerEnvelopeUs, pg3.PostgresCPUPerEnvelopeUs, pg1.CPUPerEnvelopeUs, pg1.PostgresCPUPerEnvelopeUs))
			g.Note = be.Note
			gs = append(gs, g)
		}
	}
	return gs
}

// goalsText is the plain-text goal report.
func goalsText(gs []goal) string {
	if len(gs) == 0 {
		return ""
	}
	var b bytes.Buffer
	b.WriteString("Goals (measured in this run):\n")
	for _, g := range gs {
		op := map[string]string{">=": "≥", "<=": "≤"}[g.Op]
		fmt.Fprintf(&b, "  %-4s %s: %.2f %s (goal %s %g %s) — %s\n", metWord(g.Met), g.Name, g.Value, g.Unit, op, g.Target, g.Unit, g.Figures)
		if g.Note != "" {
			fmt.Fprintf(&b, "       %s\n", g.Note)
		}
	}
	return b.String()
}

func metWord(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISS"
}
