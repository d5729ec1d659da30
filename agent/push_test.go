package agent_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/agent/agenttest"
)

// TestPushJS starts turns on the official JavaScript SDK 1.x agent over
// both 1.0 bindings. With pushNotifications in its card, the turn's
// answer arrives by push: WaitTurn says so, the answer holds the artifact
// the agent pushed before its final status, and the agent served no
// GetTask after its last push. With pushes off in the card, no push
// configuration is sent and the answer comes by polling.
func TestPushJS(t *testing.T) {
	for _, push := range []bool{true, false} {
		for _, bind := range []string{"jsonrpc", "http+json"} {
			name := bind + "/push-off"
			if push {
				name = bind + "/push-on"
			}
			t.Run(name, func(t *testing.T) {
				bindings := "jsonrpc"
				if bind == "http+json" {
					bindings = "rest"
				}
				js := a2ajstest.Start(t, a2ajstest.Options{Bindings: bindings, Push: push})
				mux := http.NewServeMux()
				srv := httptest.NewServer(mux)
				defer srv.Close()
				pushes := agent.NewPushes([]byte(strings.Repeat("k", 32)), srv.URL, nil)
				mux.Handle(agent.PushPath, pushes)
				c, err := agent.New(map[string]agent.Target{"travel": {URL: js.Origin + "/a2a", Binding: bind}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				c.UsePush(pushes)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				turn, err := c.StartTurn(ctx, "travel", "slow:Lisbon", "ctx-push")
				if err != nil {
					t.Fatal(err)
				}
				if (turn.PushID != "") != push {
					t.Fatalf("push id %q with pushes %v in the card", turn.PushID, push)
				}
				// Polling every 200ms, or every 2s with pushes on: the
				// task's 400ms end with no poll in flight.
				env, err := c.WaitTurn(ctx, "travel", turn, 200*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				want := agent.AnsweredByPoll
				if push {
					want = agent.AnsweredByPush
				}
				if turn.AnsweredBy != want {
					t.Errorf("answered by %q, want %q", turn.AnsweredBy, want)
				}
				if len(env.Parts) == 0 || env.Parts[0].Text == nil || *env.Parts[0].Text != "Today's brief: Lisbon" {
					t.Fatalf("answer %+v lacks the pushed artifact", env.Parts)
				}
				if env.Meta.FinalizedBy != "complete" {
					t.Errorf("finalized by %q", env.Meta.FinalizedBy)
				}
				rec, err := js.Received(ctx)
				if push {
					rec, err = js.WaitSettledPush(ctx, 1)
				}
				if err != nil {
					t.Fatal(err)
				}
				gets, n := rec.AfterLastPush("GetTask")
				if push && (n < 3 || gets != 0) {
					t.Errorf("%d pushes, %d GetTask after the last: %+v", n, gets, rec.Events)
				}
				if !push && (n != 0 || gets == 0) {
					t.Errorf("pushes off: %d pushes, %d GetTask: %+v", n, gets, rec.Events)
				}
			})
		}
	}
}

// TestPushWhileGetTaskFails: an a2a-go 0.3 agent that pushes but fails
// every GetTask (an internal error, which a retry may mend). The turn's
// slowed poll fails before the task ends; the push of the completed task
// that comes while WaitTurn waits to poll again answers the turn (a failed
// read waits like a poll, woken by pushes), though no read ever succeeds.
func TestPushWhileGetTaskFails(t *testing.T) {
	ag := agenttest.StartWith(nil, agenttest.Options{Card: true, Push: true, Slow: time.Second, FailGetTask: true})
	defer ag.Close()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	pushes := agent.NewPushes([]byte(strings.Repeat("k", 32)), srv.URL, nil)
	mux.Handle(agent.PushPath, pushes)
	c, err := agent.New(map[string]agent.Target{"travel": {URL: ag.URL, Timeout: 2 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.UsePush(pushes)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	turn, err := c.StartTurn(ctx, "travel", "slow:Lisbon", "ctx-push-fail")
	if err != nil {
		t.Fatal(err)
	}
	if turn.PushID == "" {
		t.Fatal("no push configuration sent")
	}
	// Polling every 10ms, slowed to 100ms with pushes: reads fail well
	// before the task's second is up.
	env, err := c.WaitTurn(ctx, "travel", turn, 10*time.Millisecond)
	gets := 0
	for _, e := range ag.Events() {
		if e.Kind == "call" && e.Method == "GetTask" {
			gets++
		}
	}
	if err != nil {
		t.Fatalf("wait: %v (%d failed reads)", err, gets)
	}
	if turn.AnsweredBy != agent.AnsweredByPush || gets == 0 {
		t.Errorf("answered by %q after %d failed reads, want push after some", turn.AnsweredBy, gets)
	}
	if len(env.Parts) == 0 || env.Parts[0].Text == nil || *env.Parts[0].Text != "Today's brief: Lisbon" {
		t.Fatalf("answer %+v", env.Parts)
	}
}
