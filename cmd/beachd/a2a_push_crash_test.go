package main

import (
	"context"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// TestA2APushAcrossAKill: the built daemon starts a scheduled turn (run
// now) at the JS SDK 1.x agent, whose card offers push notifications; the
// daemon is SIGKILLed while the agent works, the agent pushes its final
// update while the daemon is down (the SDK does not retry it), and the
// daemon restarts on the same store. The run is resumed — it waits for the
// task it had recorded, by polling, since the push it missed is not sent
// again — and its answer reaches the webhook sink exactly once; the agent
// served one SendMessage (no second turn).
func TestA2APushAcrossAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	p := startPushBrief(t, 3*time.Second, "Crash brief")
	js := p.js

	addr := freeAddr(t)
	d := newDaemon(t, bin, addr, addr, "log: {level: info}\n"+p.yaml)
	d.start()
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.stderr)
		}
	}()

	if code := d.runNow("brief"); code != 202 {
		t.Fatalf("run now: %d", code)
	}
	last := d.lastRun
	// The turn is in flight at the agent, its task recorded: kill.
	poll.Eventually(t, 20*time.Second, "the run's task to be recorded", func() bool {
		r := last()
		return r != nil && r.State == "running" && r.TaskID != ""
	})
	killed := time.Now()
	d.kill()
	// The agent finishes and pushes its final update to nobody.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pushed, err := js.WaitSettledPush(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed.Finals) != 1 || pushed.Finals[0].At < killed.UnixMilli() {
		t.Fatalf("the agent finished its task before the kill (%+v, kill at %d): no push went to a dead daemon", pushed.Finals, killed.UnixMilli())
	}

	d.start()
	poll.Eventually(t, 30*time.Second, "the resumed run to succeed", func() bool {
		r := last()
		return r != nil && r.State == "succeeded"
	})
	r := last()
	if r.AnsweredBy != "poll" {
		t.Errorf("the resumed run was answered by %q, want poll (its push went to the killed daemon)", r.AnsweredBy)
	}
	answers := p.answers
	poll.Eventually(t, 20*time.Second, "the answer's delivery to be sent", func() bool {
		var dl struct{ Deliveries []struct{ State string } }
		getJSON(d.base, "/v1/deliveries?limit=10", &dl)
		return len(dl.Deliveries) > 0 && dl.Deliveries[0].State == "sent" && answers() > 0
	})
	var dl struct{ Deliveries []struct{ State string } }
	getJSON(d.base, "/v1/deliveries?limit=10", &dl)
	if n := answers(); n != 1 || len(dl.Deliveries) != 1 {
		t.Errorf("the answer reached the sink %d times in %d deliveries, want once", n, len(dl.Deliveries))
	}
	rec, err := js.Received(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sends := agentCalls(rec, "SendMessage"); sends != 1 {
		t.Errorf("the agent served %d SendMessage, want 1 (the run resumed its task): %+v", sends, rec.Events)
	}
	d.stop()
}
