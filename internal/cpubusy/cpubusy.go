// Package cpubusy tells a commit loop whether the machine's processors are
// saturated: whether, over the last sampling period, they were idle (or
// waiting for I/O) less than a quarter of the time, as the kernel counts it
// in /proc/stat. Both stores' commit loops wait for company only then: a
// larger commit saves processor time that other work is waiting for, while
// with processors to spare the wait only lengthens every caller's turn.
//
// A daemon that waits for its disk leaves some idle time even on a
// saturated machine (beachd-bench's default run on two cores: a median of
// 15% idle in 100 ms windows while beachd runs, nine in ten under 24%), so
// the threshold is above that; a machine with cores to spare is far above
// it. Where /proc/stat cannot be read the gauge never says busy. In a
// container /proc/stat counts the host's processors: a container held to a
// CPU quota on an idle host is not seen as saturated.
package cpubusy

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"time"
)

const (
	// Period is how often a gauge samples the counters.
	Period = 200 * time.Millisecond
	// busyIdle is the idle share under which the processors are busy.
	busyIdle = 0.25
)

// Gauge samples the processors' counters at most once a Period. It is
// safe for concurrent use. A Gauge without Read keeps the answer it was
// given (Fixed; tests use it).
type Gauge struct {
	// Read returns the machine's idle and total processor time; ReadProcStat
	// unless tests set another.
	Read func() (idle, total uint64, ok bool)

	mu          sync.Mutex
	at          time.Time
	idle, total uint64
	busy        bool
}

// New returns a gauge of this machine's processors.
func New() *Gauge { return &Gauge{Read: ReadProcStat} }

// Fixed returns a gauge that always answers busy, the value it is given,
// whatever the machine does (for tests).
func Fixed(busy bool) *Gauge { return &Gauge{busy: busy} }

// Saturated reports whether the processors were busy over the last period
// that ended at least Period ago; it samples again when that is past.
func (g *Gauge) Saturated(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.Read == nil || now.Sub(g.at) < Period {
		return g.busy
	}
	idle, total, ok := g.Read()
	g.busy = ok && g.total != 0 && total > g.total && idle >= g.idle &&
		float64(idle-g.idle) < busyIdle*float64(total-g.total)
	g.at = now
	if ok {
		g.idle, g.total = idle, total
	} else {
		g.idle, g.total = 0, 0
	}
	return g.busy
}

// ReadProcStat reads the machine's processor counters from /proc/stat.
func ReadProcStat() (idle, total uint64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	var buf [512]byte // the first line, the machine's totals, is short
	n, _ := f.Read(buf[:])
	return ParseProcStat(buf[:n])
}

// ParseProcStat reads the first line of /proc/stat: "cpu" and the time
// spent in user, nice, system, idle, iowait, irq, softirq and steal (then
// guest times, which user and nice already include). idle is idle plus
// iowait; total is the sum of the eight.
func ParseProcStat(b []byte) (idle, total uint64, ok bool) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return 0, 0, false
	}
	for i := 1; i < len(f) && i <= 8; i++ {
		v, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil || total+v < total {
			return 0, 0, false
		}
		total += v
		if i == 4 || i == 5 {
			idle += v
		}
	}
	return idle, total, true
}
