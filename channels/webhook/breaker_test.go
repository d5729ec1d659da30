package webhook

import (
	"testing"
	"time"
)

func TestBreakerTransitions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at    time.Duration // since t0
		op    string        // "fail", "ok" (allow + report), "try" (allow only), "report-fail"/"report-ok" (report the last try)
		allow bool          // expected allow result
		wait  time.Duration // expected wait when refused
		state BreakerState  // state after the step
	}
	tests := []struct {
		name  string
		cfg   BreakerConfig
		steps []step
	}{
		{"opens after threshold consecutive failures", BreakerConfig{Threshold: 3, Cooldown: 30 * time.Second}, []step{
			{0, "fail", true, 0, Closed},
			{1 * time.Second, "fail", true, 0, Closed},
			{2 * time.Second, "fail", true, 0, Open},
			{3 * time.Second, "try", false, 29 * time.Second, Open},
			{31 * time.Second, "try", false, time.Second, Open},
		}},
		{"success resets the count", BreakerConfig{Threshold: 3}, []step{
			{0, "fail", true, 0, Closed},
			{0, "fail", true, 0, Closed},
			{0, "ok", true, 0, Closed},
			{0, "fail", true, 0, Closed},
			{0, "fail", true, 0, Closed},
			{0, "fail", true, 0, Open},
		}},
		{"half-open probe success closes", BreakerConfig{Threshold: 1, Cooldown: 10 * time.Second}, []step{
			{0, "fail", true, 0, Open},
			{10 * time.Second, "try", true, 0, HalfOpen},
			{10 * time.Second, "try", false, time.Second, HalfOpen}, // one probe at a time
			{11 * time.Second, "report-ok", true, 0, Closed},
			{11 * time.Second, "fail", true, 0, Open}, // cool-down back at 10 s
			{20 * time.Second, "try", false, time.Second, Open},
			{21 * time.Second, "ok", true, 0, Closed},
		}},
		{"failed probes double the cool-down up to the max", BreakerConfig{Threshold: 1, Cooldown: 30 * time.Second, MaxCooldown: 100 * time.Second}, []step{
			{0, "fail", true, 0, Open},
			{30 * time.Second, "fail", true, 0, Open}, // probe fails: 60 s
			{89 * time.Second, "try", false, time.Second, Open},
			{90 * time.Second, "fail", true, 0, Open}, // 100 s (capped)
			{189 * time.Second, "try", false, time.Second, Open},
			{190 * time.Second, "fail", true, 0, Open}, // still 100 s
			{290 * time.Second, "ok", true, 0, Closed},
		}},
		{"negative threshold disables", BreakerConfig{Threshold: -1}, []step{
			{0, "fail", true, 0, Closed},
			{0, "fail", true, 0, Closed},
			{0, "fail", true, 0, Closed},
			{0, "fail", true, 0, Closed},
			{0, "fail", true, 0, Closed},
			{0, "fail", true, 0, Closed},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBreaker(tt.cfg)
			var last ticket
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				switch s.op {
				case "report-ok", "report-fail":
					b.report(last, now, s.op == "report-fail")
				default:
					may := b.mayAttempt(now)
					tk, ok, wait := b.allow(now)
					if ok != s.allow || (!ok && wait != s.wait) {
						t.Fatalf("step %d (%s at %v): allow=%v wait=%v, want %v %v", i, s.op, s.at, ok, wait, s.allow, s.wait)
					}
					if may != ok {
						t.Fatalf("step %d: mayAttempt=%v disagrees with allow=%v", i, may, ok)
					}
					if ok {
						last = tk
					}
					if ok && s.op != "try" {
						b.report(tk, now, s.op == "fail")
					}
				}
				if st, _ := b.snapshot(); st != s.state {
					t.Fatalf("step %d (%s at %v): state %v, want %v", i, s.op, s.at, st, s.state)
				}
			}
		})
	}
}

func TestBreakerIgnoresLateReports(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBreaker(BreakerConfig{Threshold: 1, Cooldown: 10 * time.Second})
	slow, ok, _ := b.allow(t0) // a slow attempt starts while closed
	if !ok {
		t.Fatal("closed breaker refused")
	}
	fast, _, _ := b.allow(t0)
	b.report(fast, t0, true) // opens
	probe, ok, _ := b.allow(t0.Add(10 * time.Second))
	if !ok || !probe.probe {
		t.Fatal("no probe after cool-down")
	}
	// The slow attempt succeeds late; it must not close the circuit nor
	// free the probe slot.
	b.report(slow, t0.Add(11*time.Second), false)
	if st, _ := b.snapshot(); st != HalfOpen {
		t.Fatalf("late report changed state to %v", st)
	}
	if _, ok, _ := b.allow(t0.Add(11 * time.Second)); ok {
		t.Fatal("second probe allowed while the first is in flight")
	}
	b.report(probe, t0.Add(12*time.Second), false)
	if st, _ := b.snapshot(); st != Closed {
		t.Fatalf("probe success left %v", st)
	}
}

func TestBreakerAbandonedProbe(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBreaker(BreakerConfig{Threshold: 1, Cooldown: 10 * time.Second})
	tk, _, _ := b.allow(t0)
	b.report(tk, t0, true)
	probe, ok, _ := b.allow(t0.Add(10 * time.Second))
	if !ok {
		t.Fatal("no probe")
	}
	b.abandon(probe)
	if st, _ := b.snapshot(); st != HalfOpen {
		t.Fatalf("abandoned probe left %v, want half-open", st)
	}
	if _, ok, _ := b.allow(t0.Add(10 * time.Second)); !ok {
		t.Fatal("abandoned probe did not free the probe slot")
	}
}
