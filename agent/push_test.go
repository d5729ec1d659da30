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
