package poll

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the failure and stops the
// caller, as testing.T's does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

func run(timeout time.Duration, cond func() bool) (failed string) {
	r := &recorder{TB: nil}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	Eventually(r, timeout, "the thing", cond)
	return ""
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	if failed := run(5*time.Second, func() bool { n++; return n == 3 }); failed != "" {
		t.Fatalf("failed: %s", failed)
	}
	if n != 3 {
		t.Fatalf("checked %d times, want 3", n)
	}
}

func TestEventuallyFailsNamingWhatItAwaited(t *testing.T) {
	start := time.Now()
	failed := run(30*time.Millisecond, func() bool { return false })
	if !strings.Contains(failed, "the thing") || !strings.Contains(failed, "30ms") {
		t.Fatalf("failure = %q", failed)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("gave up before the timeout")
	}
}
