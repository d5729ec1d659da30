package schedule

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

func TestFiresAgainstA2AAgent(t *testing.T) {
	// A real a2a-go agent: "brief:" completes a task with a typed
	// briefing, "fail:" fails it, "hang:" never settles.
	srv := agenttest.Start()
	defer srv.Close()
	client, err := agent.New(map[string]agent.Target{"travel": {URL: srv.URL, Timeout: 5 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}

	t0 := utc("2026-03-02T08:00:01Z")
	c := fakeclock.New(t0)
	ctx := context.Background()
	brief := def("brief", "0 8 * * *")
	brief.Message = "brief:"
	fail := def("fail", "0 8 * * *")
	fail.Message, fail.ErrorNotice = "fail:calendar backend unreachable", true
	hang := def("hang", "0 8 * * *")
	hang.Message, hang.Timeout = "hang:", 300*time.Millisecond
	enq := &fakeEnqueuer{reg: envelope.NewRegistry()}
	s, db := newScheduler(t, Config{Schedules: []Definition{brief, fail, hang}, Agents: map[string]bool{"travel": true},
		Now: c.Now, DefaultZone: time.UTC, Poll: 20 * time.Millisecond}, client, enq, t0.Add(-time.Hour))
	stop := running(t, s)
	poll.Eventually(t, 10*time.Second, "every run finished", func() bool {
		for _, n := range []string{"brief", "fail", "hang"} {
			runs, _ := db.ScheduleRuns(ctx, n, 1)
			if len(runs) == 0 || !runs[0].Finished() {
				return false
			}
		}
		return true
	})
	stop()

	runs, _ := db.ScheduleRuns(ctx, "brief", 0)
	if len(runs) != 1 || runs[0].State != store.RunSucceeded || runs[0].TaskID == "" {
		t.Fatalf("brief runs = %+v", runs)
	}
	var got *enqueued
	for _, e := range enq.Got() {
		if e.Source == "schedule:brief" {
			got = &e
		}
	}
	if got == nil {
		t.Fatalf("the brief's result was not enqueued: %+v", enq.Got())
	}
	env := got.Env
	if len(env.Parts) != 2 || env.Parts[0].PartType() != "response" || env.Parts[0].TextValue() != "Good morning. Three tasks today." ||
		env.Parts[1].PartType() != "domain-data" || env.Parts[1].Metadata["slotKey"] != "today" {
		t.Fatalf("parts = %+v", env.Parts)
	}
	data, err := env.Parts[1].DataObject()
	if err != nil || len(data["tasks"].([]any)) != 3 {
		t.Fatalf("domain data = %v %v", data, err)
	}
	if env.Meta.TurnID != runs[0].TaskID || env.Meta.SessionID != runs[0].ContextID || env.Meta.FinalizedBy != "complete" {
		t.Fatalf("meta = %+v, run = %+v", env.Meta, runs[0])
	}
	if got.Agent != "travel" || got.To[0].Address != "alice@example.org" {
		t.Fatalf("enqueued to %+v by %s", got.To, got.Agent)
	}

	runs, _ = db.ScheduleRuns(ctx, "fail", 0)
	if len(runs) != 1 || runs[0].State != store.RunFailed || !strings.Contains(runs[0].Reason, "calendar backend unreachable") || runs[0].ErrorNoticeID == "" {
		t.Fatalf("fail runs = %+v", runs)
	}
	runs, _ = db.ScheduleRuns(ctx, "hang", 0)
	if len(runs) != 1 || runs[0].State != store.RunFailed || !strings.Contains(runs[0].Reason, "did not settle in time") {
		t.Fatalf("hang runs = %+v", runs)
	}
}
