// Package poll holds the one way tests wait for an outcome that arrives
// asynchronously: poll a condition with a deadline, never sleep a fixed
// time and hope. Production code never imports this package.
package poll

import (
	"testing"
	"time"
)

// Interval is how long Eventually waits between two checks.
const Interval = 5 * time.Millisecond

// Eventually calls cond until it returns true and fails the test with a
// message naming what was awaited if that has not happened within timeout.
// cond is always checked once more after the deadline passes, so a slow
// machine that overran the deadline during the last wait does not fail a
// test whose outcome did arrive.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			if cond() {
				return
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(Interval)
	}
}
