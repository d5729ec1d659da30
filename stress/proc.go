package stress

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// OpenFDs counts this process's open file descriptors (/proc/self/fd).
func OpenFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents) - 1 // the directory being read
}

// Resources is a snapshot of goroutines and descriptors.
type Resources struct {
	Goroutines int `json:"goroutines"`
	FDs        int `json:"fds"`
}

// Snapshot measures now. Goroutines counts beachd's and the test's own, not
// toxiproxy's: a toxiproxy link can stay blocked in its toxic after the
// proxy is stopped (seen with the timeout toxic), and that is the fault
// injector's leak, not beachd's.
func Snapshot() Resources { return Resources{Goroutines: ownGoroutines(), FDs: OpenFDs()} }

func ownGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if len(bytes.TrimSpace(g)) > 0 && !bytes.Contains(g, []byte("github.com/Shopify/toxiproxy/")) {
			count++
		}
	}
	return count
}

// Settle polls until goroutines and descriptors are back to at most
// before (plus slack goroutines), or the deadline passes; it returns the
// last measurement and whether it settled.
func Settle(before Resources, slack int, within time.Duration) (Resources, bool) {
	deadline := time.Now().Add(within)
	for {
		runtime.GC()
		now := Snapshot()
		if now.Goroutines <= before.Goroutines+slack && now.FDs <= before.FDs {
			return now, true
		}
		if time.Now().After(deadline) {
			return now, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stacks returns every goroutine's stack (for a leak report).
func Stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// FDList describes the open descriptors (for a leak report).
func FDList() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var b strings.Builder
	for _, e := range ents {
		t, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fmt.Fprintf(&b, "%s -> %s\n", e.Name(), t)
	}
	return b.String()
}

// ProcStatus reads a kB field of /proc/PID/status (VmRSS, VmHWM) in MiB.
func ProcStatus(pid int, field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}
