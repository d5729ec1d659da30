package agent_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/envelope"
)

func newClient(t *testing.T, url string, headers map[string]string) *agent.Client {
	t.Helper()
	c, err := agent.New(map[string]agent.Target{"travel": {URL: url, Headers: headers, Timeout: 5 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSuspendThenInject(t *testing.T) {
	srv := agenttest.Start()
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	turn, err := c.StartTurn(ctx, "travel", "approve:appr-1", "")
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.WaitTurn(ctx, "travel", turn, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if env.Meta.FinalizedBy != "suspended" || env.Meta.SessionID == "" || env.Meta.TurnID != turn.TaskID {
		t.Fatalf("meta = %+v", env.Meta)
	}
	if err := envelope.NewRegistry().Validate(env); err != nil {
		t.Fatalf("envelope from a suspended turn does not validate: %v", err)
	}
	reqs, err := env.ApprovalRequests()
	if err != nil || len(reqs) != 1 || reqs[0].ApprovalID != "appr-1" || reqs[0].Session != env.Meta.SessionID || reqs[0].Turn != env.Meta.TurnID {
		t.Fatalf("approval requests = %+v, %v", reqs, err)
	}

	at := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	resp := envelope.ApprovalResponse{ApprovalID: "appr-1", Decision: "granted", Reason: "fine", DecidedBy: "alice@example.org", DecidedAt: at}
	if err := c.Inject(ctx, "travel", reqs[0].Session, reqs[0].Turn, resp); err != nil {
		t.Fatal(err)
	}
	got := srv.Received()
	if len(got) != 1 {
		t.Fatalf("received %d responses", len(got))
	}
	r := got[0]
	if r.ContextID != reqs[0].Session || r.TaskID != reqs[0].Turn || r.Metadata["partType"] != "approval-response" {
		t.Fatalf("received %+v", r)
	}
	if r.Response.ApprovalID != "appr-1" || r.Response.Decision != "granted" || r.Response.Reason != "fine" ||
		r.Response.DecidedBy != "alice@example.org" || !r.Response.DecidedAt.Equal(at) {
		t.Fatalf("response %+v", r.Response)
	}
	for _, k := range []string{"approvalId", "decision", "reason", "decidedBy", "decidedAt"} {
		if _, ok := r.Raw[k]; !ok {
			t.Errorf("data part lacks %s: %v", k, r.Raw)
		}
	}
	// The resumed turn completes.
	deadline := time.Now().Add(5 * time.Second)
	for {
		env, err := c.WaitTurn(ctx, "travel", &agent.Turn{ContextID: turn.ContextID, TaskID: turn.TaskID}, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if env.Meta.FinalizedBy == "complete" {
			if env.Text("response") != "Resumed." {
				t.Fatalf("resumed reply %q", env.Text("response"))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("turn did not complete after injection")
		}
	}
	// A second injection into the completed task is refused permanently.
	// The a2a-go server can answer "internal error" (temporary, which the
	// injection outbox retries) while it is still finishing the task's
	// executor (about 1 run in 300 under -race); the answer that settles
	// it must be permanent.
	for i := 0; i < 50; i++ {
		err = c.Inject(ctx, "travel", reqs[0].Session, reqs[0].Turn, resp)
		if err == nil || agent.IsPermanent(err) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err == nil || !agent.IsPermanent(err) {
		t.Fatalf("inject into terminal task: err = %v, permanent = %v", err, agent.IsPermanent(err))
	}
}

func TestInjectUnknownTaskIsPermanent(t *testing.T) {
	srv := agenttest.Start()
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	err := c.Inject(context.Background(), "travel", "s", "no-such-task", envelope.ApprovalResponse{ApprovalID: "x", Decision: "denied", DecidedAt: time.Now()})
	if err == nil || !agent.IsPermanent(err) {
		t.Fatalf("err = %v", err)
	}
	err = c.Inject(context.Background(), "nobody", "s", "t", envelope.ApprovalResponse{})
	if !errors.Is(err, agent.ErrUnknownAgent) || !agent.IsPermanent(err) {
		t.Fatalf("unknown agent: %v", err)
	}
}

func TestInjectAgentDownIsTemporary(t *testing.T) {
	srv := agenttest.Start()
	url := srv.URL
	srv.Close()
	c := newClient(t, url, nil)
	err := c.Inject(context.Background(), "travel", "s", "t", envelope.ApprovalResponse{ApprovalID: "x", Decision: "denied", DecidedAt: time.Now()})
	if err == nil || agent.IsPermanent(err) {
		t.Fatalf("err = %v, want a temporary error", err)
	}
}

func TestCompletedTurnAndImmediateMessage(t *testing.T) {
	srv := agenttest.Start()
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	turn, err := c.StartTurn(ctx, "travel", "Today's tasks", "ctx-morning")
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.WaitTurn(ctx, "travel", turn, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if env.Meta.FinalizedBy != "complete" || env.Meta.SessionID != "ctx-morning" {
		t.Fatalf("meta %+v", env.Meta)
	}
	if env.Text("response") != "Today's brief: Today's tasks" || len(env.PartsOf("domain-data")) != 1 {
		t.Fatalf("parts %+v", env.Parts)
	}
	if err := envelope.NewRegistry().Validate(env); err != nil {
		t.Fatal(err)
	}

	turn, err = c.StartTurn(ctx, "travel", "reply:hello", "")
	if err != nil {
		t.Fatal(err)
	}
	if turn.Message == nil {
		t.Fatalf("want an immediate message, got %+v", turn)
	}
	env, err = c.WaitTurn(ctx, "travel", turn, 0)
	if err != nil || env.Text("response") != "hello" || env.Meta.FinalizedBy != "complete" {
		t.Fatalf("env %+v err %v", env, err)
	}
}

func TestHeadersAreSent(t *testing.T) {
	srv := agenttest.Start()
	defer srv.Close()
	var got string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer proxy.Close()
	c := newClient(t, proxy.URL, map[string]string{"Authorization": "Bearer k"})
	err := c.Inject(context.Background(), "travel", "s", "t", envelope.ApprovalResponse{ApprovalID: "x", Decision: "denied", DecidedAt: time.Now()})
	if err == nil || got != "Bearer k" {
		t.Fatalf("err %v, header %q", err, got)
	}
}

func TestWaitTurnHonoursContext(t *testing.T) {
	srv := agenttest.Start()
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.WaitTurn(ctx, "travel", &agent.Turn{TaskID: "missing"}, 10*time.Millisecond)
	if err == nil {
		t.Fatal("want an error for a task that does not exist")
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	if _, err := agent.New(map[string]agent.Target{"x": {URL: "ftp://x"}}, nil); err == nil {
		t.Fatal("want error")
	}
}
