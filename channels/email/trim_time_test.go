//go:build unix

package email

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTrimLinearTime: trimming must stay linear on hostile input (1 MiB of
// lines built to make each rule look ahead or back), so a long mail cannot
// tie up the intake. It compares the CPU time (not the wall time, which a
// busy machine stretches) of 1 MiB with that of 64 KiB (a quarter of each
// under the race detector, trimTimeScale): linear work grows 16×,
// quadratic 256×.
func TestTrimLinearTime(t *testing.T) {
	shapes := map[string]string{
		"one long line":      "On 2024-01-15 10:30 a@b.test ",
		"attribution starts": "On Mon, Jan 15, 2024 at 10:30 AM Agent <\n",
		"wrapped tails":      "2024-01-15 10:30 x\na@b.test\n",
		"separators":         "-----\ntext\n",
		"own separators":     "-----\ntext\n" + strings.Repeat("more text\n", 20) + "> q\n",
		"header lines":       "From: a\n",
		"glued quote text":   "> q\nt\n",
		"bottom posts":       "On 1/2/2024 A <a@b.c> wrote:\n> q\nyes\n",
		"digits and at":      "1 2 3 @ @ 4 5 : \n",
		"signature-ish":      "Sent from my " + strings.Repeat("x", 50) + "\n",
		"device lines":       "Yes\n" + strings.Repeat("Sent from my iPhone\n\n", 40) + "A sentence of prose that goes on for quite a while here.\n",
		"rules in prose":     "\n* * *\n\nA sentence of prose that goes on for quite a while here, and more.\n",
		"adjacent rules":     "Heading line here\n---------\nrow one\nrow two\n",
		"framed lines":       "-------- Mesaj nou --------\ntext\n",
		"dashed names":       "text\n-Alice\n\n",
		"colon lines":        "În 15.01.2024 la 10:30, A <a@b.ro> a scris\n",
	}
	for name, unit := range shapes {
		t.Run(name, func(t *testing.T) {
			small := cpuTrim(t, strings.Repeat(unit, (64<<10)/trimTimeScale/len(unit)), 3)
			large := cpuTrim(t, strings.Repeat(unit, (1<<20)/trimTimeScale/len(unit)), 1)
			t.Logf("CPU: 64 KiB %v, 1 MiB %v", small, large)
			if large > 2*time.Second/trimTimeScale && large > 64*small {
				t.Errorf("1 MiB took %v of CPU, 64 KiB %v: worse than linear", large, small)
			}
		})
	}
}

// cpuTrim returns the least CPU time (user and system, the whole process)
// of n runs of TrimReply.
func cpuTrim(t *testing.T, s string, n int) time.Duration {
	best := time.Duration(1<<63 - 1)
	for i := 0; i < n; i++ {
		before := cpuTime(t)
		TrimReply(s)
		if d := cpuTime(t) - before; d < best {
			best = d
		}
	}
	return best
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
