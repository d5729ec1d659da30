package schedule

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

// briefAgent is a real a2a-go agent: "brief" completes a task with an
// artifact (a response text part and a domain-data part); "fail" fails the
// task; "hang" never settles.
type briefAgent struct{}

func (briefAgent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	text := ""
	for _, p := range rc.Message.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			text += tp.Text
		}
	}
	if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
		return err
	}
	switch text {
	case "fail":
		ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateFailed,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: "calendar backend unreachable"}))
		ev.Final = true
		return q.Write(ctx, ev)
	case "hang":
		return q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil))
	}
	art := a2a.NewArtifactEvent(rc,
		a2a.TextPart{Text: "Good morning. Three tasks today.", Metadata: map[string]any{"partType": "response"}},
		a2a.DataPart{Data: map[string]any{"tasks": []any{"pack", "book taxi", "call Bob"}},
			Metadata: map[string]any{"partType": "domain-data", "slotKey": "today"}})
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

func (briefAgent) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func TestFiresAgainstA2AAgent(t *testing.T) {
	h := a2asrv.NewHandler(briefAgent{}, a2asrv.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	srv := httptest.NewServer(a2asrv.NewJSONRPCHandler(h))
	defer srv.Close()
	client, err := agent.New(map[string]agent.Target{"travel": {URL: srv.URL + "/", Timeout: 5 * time.Second}}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}

	t0 := utc("2026-03-02T08:00:01Z")
	c := fakeclock.New(t0)
	ctx := context.Background()
	brief := def("brief", "0 8 * * *")
	brief.Message = "brief"
	fail := def("fail", "0 8 * * *")
	fail.Message, fail.ErrorNotice = "fail", true
	hang := def("hang", "0 8 * * *")
	hang.Message, hang.Timeout = "hang", 300*time.Millisecond
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
