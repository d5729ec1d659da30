package cpubusy

import (
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	for _, c := range []struct {
		in          string
		idle, total uint64
		ok          bool
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice
		{"cpu  100 2 30 400 50 1 2 3 7 0\ncpu0 50 1 15 200 25 0 1 1 3 0\n", 450, 588, true},
		{"cpu 10 0 5 80 5\n", 85, 100, true}, // an old kernel's five counters
		{"cpu 10 0 5\n", 0, 0, false},
		{"cpu0 10 0 5 80 5 0 0 0\n", 0, 0, false},
		{"cpu 10 x 5 80 5 0 0 0\n", 0, 0, false},
		{"cpu 18446744073709551615 1 0 0 0\n", 0, 0, false}, // the sum overflows
		{"", 0, 0, false},
	} {
		idle, total, ok := ParseProcStat([]byte(c.in))
		if idle != c.idle || total != c.total || ok != c.ok {
			t.Errorf("%q: %d %d %v, want %d %d %v", c.in, idle, total, ok, c.idle, c.total, c.ok)
		}
	}
	if _, _, ok := ReadProcStat(); !ok {
		t.Log("no /proc/stat here: the gauge never says busy")
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("cpu  100 2 30 400 50 1 2 3 7 0\ncpu0 50 1 15 200 25 0 1 1 3 0\n"))
	f.Add([]byte("cpu 1 2 3 4 5 6 7 8 9 10 11 12"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if idle, total, ok := ParseProcStat(b); ok && idle > total {
			t.Fatalf("idle %d > total %d", idle, total)
		}
	})
}

// The gauge says saturated for a period whose idle share was under
// busyIdle, samples at most once a period, and never says so without two
// readings or when the counters cannot be read or went back.
func TestCPUGauge(t *testing.T) {
	type reading struct {
		idle, total uint64
		ok          bool
	}
	var readings []reading
	reads := 0
	g := &Gauge{Read: func() (uint64, uint64, bool) {
		r := readings[reads]
		reads++
		return r.idle, r.total, r.ok
	}}
	now := time.Unix(1000, 0)
	step := func(r reading, want bool) {
		t.Helper()
		readings = append(readings, r)
		now = now.Add(Period)
		if got := g.Saturated(now); got != want {
			t.Fatalf("reading %d (%+v): saturated %v, want %v", len(readings), r, got, want)
		}
	}
	step(reading{100, 1000, true}, false) // one reading: nothing to compare
	step(reading{120, 1100, true}, true)  // 20% idle
	if g.Saturated(now.Add(Period/2)) != true || reads != 2 {
		t.Fatalf("sampled within a period (%d reads)", reads)
	}
	step(reading{170, 1200, true}, false) // 50% idle
	step(reading{194, 1300, true}, true)  // 24%
	step(reading{219, 1400, true}, false) // 25%: not under
	step(reading{0, 0, false}, false)     // unreadable
	step(reading{220, 1500, true}, false) // no previous reading
	step(reading{221, 1600, true}, true)
	step(reading{210, 1700, true}, false) // idle went back
	step(reading{211, 1650, true}, false) // total went back
	if Fixed(true).Saturated(now) != true {
		t.Fatal("a gauge without read must keep its answer")
	}
}
