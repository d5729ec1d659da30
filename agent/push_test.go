package agent_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/envelope"
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

// TestResumeTurnPushJS: a turn started at the JS SDK 1.x agent (a task it
// holds) by one process is resumed by the next — a new Client and Pushes
// on the same secret and URL, as after a restart — under the push id it
// started with (ResumeTurn). Once the resumed turn read the task, the
// task is released: the agent's pushes, to the URL and token it was given
// before, answer the resumed turn, with the pushed artifact. A push id
// beachd does not make is not registered: that turn is polled.
func TestResumeTurnPushJS(t *testing.T) {
	js := a2ajstest.Start(t, a2ajstest.Options{Push: true})
	var handler atomic.Pointer[agent.Pushes]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.Load().ServeHTTP(w, r)
	}))
	defer srv.Close()
	secret := []byte(strings.Repeat("k", 32))
	client := func() *agent.Client {
		p := agent.NewPushes(secret, srv.URL, nil)
		handler.Store(p)
		c, err := agent.New(map[string]agent.Target{"travel": {URL: js.Origin + "/a2a"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.UsePush(p)
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := client().StartTurn(ctx, "travel", "hold:Porto", "ctx-resume")
	if err != nil {
		t.Fatal(err)
	}
	if first.PushID == "" || first.Task == nil {
		t.Fatalf("turn %+v: want a task with a push id", first)
	}
	if !agent.ValidPushID(first.PushID) {
		t.Fatalf("push id %q is not valid", first.PushID)
	}

	// The first process takes the task's first pushes (the whole task,
	// then its working status), then stops: its turn is never waited for.
	for pushes := 0; pushes < 2; {
		rec, err := js.Received(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pushes = 0
		for _, e := range rec.Events {
			if e.Kind == "push" {
				pushes++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := client()
	if bad := c.ResumeTurn(ctx, "travel", first.ContextID, first.TaskID, "beachd-../x"); bad.PushID != "" {
		t.Fatalf("a malformed push id was registered: %+v", bad)
	}
	turn := c.ResumeTurn(ctx, "travel", first.ContextID, first.TaskID, first.PushID)
	if turn.PushID != first.PushID {
		t.Fatalf("resumed under push id %q, want %q", turn.PushID, first.PushID)
	}
	gets := func() int {
		rec, err := js.Received(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Calls("GetTask")
	}
	type result struct {
		env *envelope.Envelope
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Polling every 2s (slowed 20s with pushes): the answer comes by push.
		env, err := c.WaitTurn(ctx, "travel", turn, 2*time.Second)
		done <- result{env, err}
	}()
	for gets() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if n, err := js.Release(ctx); err != nil || n != 1 {
		t.Fatalf("release: %d %v", n, err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if turn.AnsweredBy != agent.AnsweredByPush {
		t.Errorf("the resumed turn was answered by %q, want push", turn.AnsweredBy)
	}
	if len(r.env.Parts) == 0 || r.env.Parts[0].Text == nil || *r.env.Parts[0].Text != "Today's brief: Porto" {
		t.Fatalf("answer %+v lacks the pushed artifact", r.env.Parts)
	}
}

func TestValidPushID(t *testing.T) {
	for id, want := range map[string]bool{
		"beachd-0123456789abcdef0123456789abcdef":  true,
		"beachd-0123456789ABCDEF0123456789abcdef":  false,
		"beachd-0123456789abcdef0123456789abcde":   false,
		"beachd-0123456789abcdef0123456789abcdef0": false,
		"0123456789abcdef0123456789abcdef":         false,
		"beachd-../../../../../../../../../../xx":  false,
		"": false,
	} {
		if got := agent.ValidPushID(id); got != want {
			t.Errorf("ValidPushID(%q) = %v, want %v", id, got, want)
		}
	}
}
