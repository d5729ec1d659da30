package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// TestA2APushOtherReplica: two replicas of the built daemon share one
// PostgreSQL; each one's public_url is the other's address, so every push
// for a turn reaches the replica that does not wait for it. A scheduled
// turn (run now) at the JS SDK 1.x agent, whose card offers pushes: the
// receiving replica records each push and wakes the waiting one, which
// takes them at the wake-up (not at a poll) and answers the turn by push;
// the agent serves no GetTask, and the answer reaches the sink once.
func TestA2APushOtherReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	dsn := pgtest.DSN(t)
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	p := startPushBrief(t, time.Second, "Replica brief")
	js := p.js

	addrs := []string{freeAddr(t), freeAddr(t)}
	ds := make([]*daemon, 2)
	for i := range ds {
		d := newDaemon(t, bin, addrs[i], addrs[1-i], fmt.Sprintf(`log: {level: debug}
store:
  driver: postgres
  dsn: %q
approvals: {secret: %q}
`, dsn, replicaSecret)+p.yaml)
		d.start()
		t.Cleanup(func() {
			if d.cmd.ProcessState == nil {
				d.stop()
			}
		})
		ds[i] = d
	}
	logs := func() {
		for i, d := range ds {
			t.Logf("replica %d log:\n%s", i, d.stderr)
		}
	}

	if code := ds[0].runNow("brief"); code != 202 {
		t.Fatalf("run now: %d", code)
	}
	last := ds[0].lastRun
	poll.Eventually(t, 30*time.Second, "the run to succeed", func() bool {
		r := last()
		return r != nil && r.State == "succeeded"
	})
	if r := last(); r.AnsweredBy != "push" {
		t.Errorf("the run was answered by %q, want push", r.AnsweredBy)
	}
	checkPushes(t, js, true, 1)
	answers := p.answers
	poll.Eventually(t, 20*time.Second, "the answer at the sink", func() bool { return answers() > 0 })
	rec, err := js.Received(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if gets := rec.Calls("GetTask"); gets != 0 {
		t.Errorf("the agent served %d GetTask, want none: %+v", gets, rec.Events)
	}
	for _, d := range ds {
		d.stop()
	}
	if n := answers(); n != 1 {
		t.Errorf("the answer reached the sink %d times, want once", n)
	}
	// One replica received every push and forwarded it; the other waited,
	// and took the final one at its wake-up.
	var forwarded, taken int
	for _, d := range ds {
		for _, line := range strings.Split(d.stderr.String(), "\n") {
			switch {
			case strings.Contains(line, `msg="a2a push forwarded"`):
				forwarded++
			case strings.Contains(line, `msg="a2a push"`) && strings.Contains(line, "relayed=wake") &&
				strings.Contains(line, "COMPLETED"):
				taken++
			case strings.Contains(line, `msg="a2a push"`) && !strings.Contains(line, "relayed="):
				t.Errorf("a push reached the waiting replica: %s", line)
			}
		}
	}
	if forwarded == 0 || taken != 1 {
		t.Errorf("%d pushes forwarded, the final one taken at a wake-up %d times; want some, and once", forwarded, taken)
		logs()
	}
}
