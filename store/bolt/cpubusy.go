package bolt

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// cpuGauge tells the commit loop whether the machine's processors are
// saturated: whether, over the last sampling period, they were idle (or
// waiting for I/O) less than busyIdle of the time, as the kernel counts it
// in /proc/stat. Waiting for company (group.go) pays only then: a larger
// commit saves processor time that other work is waiting for. With
// processors to spare, the wait only lengthens every caller's turn, and a
// dispatch worker waits for its outcome's commit, so it would cap the
// deliveries a second.
//
// A daemon that waits for its disk leaves some idle time even on a
// saturated machine (beachd-bench's default run on two cores: a median of
// 15% idle in 100 ms windows while beachd runs, nine in ten under 24%), so
// busyIdle is above that; a machine with cores to spare is far above it.
// Where /proc/stat cannot be read the gauge never says busy, and the loop
// commits without waiting. In a container /proc/stat counts the host's
// processors: a container held to a CPU quota on an idle host is not seen
// as saturated. A gauge without read keeps the answer it holds (tests set
// it). Only the commit loop uses it (one loop runs at a time).
type cpuGauge struct {
	read        func() (idle, total uint64, ok bool)
	at          time.Time
	idle, total uint64
	busy        bool
}

const (
	// cpuPeriod is how often the gauge samples the counters.
	cpuPeriod = 200 * time.Millisecond
	// busyIdle is the idle share under which the processors are busy.
	busyIdle = 0.25
)

// saturated reports whether the processors were busy over the last period
// that ended at least cpuPeriod ago; it samples again when that is past.
func (g *cpuGauge) saturated(now time.Time) bool {
	if g.read == nil || now.Sub(g.at) < cpuPeriod {
		return g.busy
	}
	idle, total, ok := g.read()
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

// readProcStat reads the machine's processor counters from /proc/stat.
func readProcStat() (idle, total uint64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	var buf [512]byte // the first line, the machine's totals, is short
	n, _ := f.Read(buf[:])
	return parseProcStat(buf[:n])
}

// parseProcStat reads the first line of /proc/stat: "cpu" and the time
// spent in user, nice, system, idle, iowait, irq, softirq and steal (then
// guest times, which user and nice already include). idle is idle plus
// iowait; total is the sum of the eight.
func parseProcStat(b []byte) (idle, total uint64, ok bool) {
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
