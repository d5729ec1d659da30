package agent_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/envelope"
)

// received is what a test peer recorded of one approval-response.
type received struct{ taskID, contextID, approvalID, decision, partType string }

// peer is a real agent of one generation.
type peer struct {
	name      string
	url       string // the a2a_url an operator would configure
	approvals func(ctx context.Context, n int) ([]received, error)
}

func jsPeer(t *testing.T, bindings string) peer {
	s := a2ajstest.Start(t, a2ajstest.Options{Bindings: bindings})
	return peer{name: "js-1.0-" + bindings, url: s.JSONRPC, approvals: func(ctx context.Context, n int) ([]received, error) {
		got, err := s.WaitApprovals(ctx, n)
		var out []received
		for _, a := range got {
			id, _ := a.Response["approvalId"].(string)
			dec, _ := a.Response["decision"].(string)
			pt, _ := a.Metadata["partType"].(string)
			out = append(out, received{a.TaskID, a.ContextID, id, dec, pt})
		}
		return out, err
	}}
}

func goPeer(t *testing.T) peer {
	s := agenttest.StartOn(nil, true)
	t.Cleanup(s.Close)
	return peer{name: "a2a-go-0.3", url: s.URL, approvals: func(ctx context.Context, n int) ([]received, error) {
		for {
			got := s.Received()
			if len(got) >= n {
				var out []received
				for _, r := range got {
					pt, _ := r.Metadata["partType"].(string)
					out = append(out, received{r.TaskID, r.ContextID, r.Response.ApprovalID, r.Response.Decision, pt})
				}
				return out, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-s.Notify():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}}
}

func clientFor(t *testing.T, url, version string) *agent.Client {
	t.Helper()
	c, err := agent.New(map[string]agent.Target{"travel": {URL: url, Version: version, Timeout: 5 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBothGenerations runs one Beach turn against each real peer with
// a2a_version auto: the card decides, a turn suspended on an approval is
// resumed by an injected decision and completes, a task is polled to its
// end, and an immediate message is a settled envelope.
func TestBothGenerations(t *testing.T) {
	cases := []struct {
		peer          func(t *testing.T) peer
		gen, binding  string
		inputRequired string
	}{
		{func(t *testing.T) peer { return jsPeer(t, "jsonrpc") }, agent.V10, agent.BindingJSONRPC, ""},
		{func(t *testing.T) peer { return jsPeer(t, "rest") }, agent.V10, agent.BindingHTTPJSON, ""},
		{goPeer, agent.V03, agent.BindingJSONRPC, ""},
	}
	for _, tc := range cases {
		p := tc.peer(t)
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := clientFor(t, p.url, "")
			turn, err := c.StartTurn(ctx, "travel", "approve:appr-"+p.name, "")
			if err != nil {
				t.Fatal(err)
			}
			st, _ := c.Status("travel")
			if st.Generation != tc.gen || st.Binding != tc.binding || st.ChosenBy != "card" || st.CardError != "" || st.CardReadAt.IsZero() {
				t.Fatalf("status %+v, want %s %s chosen by the card", st, tc.gen, tc.binding)
			}
			env, err := c.WaitTurn(ctx, "travel", turn, 10*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if env.Meta.FinalizedBy != "suspended" || env.Meta.TurnID != turn.TaskID {
				t.Fatalf("meta %+v", env.Meta)
			}
			if err := envelope.NewRegistry().Validate(env); err != nil {
				t.Fatalf("suspended envelope does not validate: %v", err)
			}
			reqs, err := env.ApprovalRequests()
			if err != nil || len(reqs) != 1 || reqs[0].ApprovalID != "appr-"+p.name || reqs[0].Turn != turn.TaskID {
				t.Fatalf("approval requests %+v, %v", reqs, err)
			}
			resp := envelope.ApprovalResponse{ApprovalID: reqs[0].ApprovalID, Decision: "granted", DecidedBy: "alice@example.org",
				DecidedAt: time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)}
			if err := c.Inject(ctx, "travel", reqs[0].Session, reqs[0].Turn, resp); err != nil {
				t.Fatal(err)
			}
			got, err := p.approvals(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			want := received{turn.TaskID, reqs[0].Session, reqs[0].ApprovalID, "granted", "approval-response"}
			if len(got) != 1 || got[0] != want {
				t.Fatalf("agent received %+v, want %+v", got, want)
			}
			// The decision resumes the held task, which completes.
			for {
				env, err = c.WaitTurn(ctx, "travel", &agent.Turn{ContextID: turn.ContextID, TaskID: turn.TaskID}, 10*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if env.Meta.FinalizedBy == "complete" {
					break
				}
				if ctx.Err() != nil {
					t.Fatal("the resumed task did not complete")
				}
			}
			if env.Text("response") != "Resumed." {
				t.Fatalf("resumed reply %q", env.Text("response"))
			}

			// A task answer polled to its end.
			text := "slow:Today's tasks"
			if tc.gen == agent.V03 {
				text = "Today's tasks" // the a2a-go agent has no slow mode
			}
			turn, err = c.StartTurn(ctx, "travel", text, "ctx-morning")
			if err != nil {
				t.Fatal(err)
			}
			env, err = c.WaitTurn(ctx, "travel", turn, 20*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if env.Meta.FinalizedBy != "complete" || env.Meta.SessionID != "ctx-morning" ||
				env.Text("response") != "Today's brief: Today's tasks" || len(env.PartsOf("domain-data")) != 1 {
				t.Fatalf("brief %+v", env)
			}

			turn, err = c.StartTurn(ctx, "travel", "reply:hello", "")
			if err != nil || turn.Message == nil {
				t.Fatalf("immediate message: %+v, %v", turn, err)
			}
			env, err = c.WaitTurn(ctx, "travel", turn, 0)
			if err != nil || env.Text("response") != "hello" {
				t.Fatalf("env %+v err %v", env, err)
			}

			// Errors keep their kind across generations and bindings.
			_, err = c.WaitTurn(ctx, "travel", &agent.Turn{TaskID: "no-such-task"}, 10*time.Millisecond)
			if !errors.Is(err, agent.ErrTaskNotFound) || !agent.IsPermanent(err) {
				t.Fatalf("unknown task: %v", err)
			}
		})
	}
}

// TestJSAgentSeesVersionHeader: every request beachd makes of a 1.0 agent
// carries A2A-Version: 1.0 (the JS SDK refuses requests without it).
func TestJSAgentSeesVersionHeader(t *testing.T) {
	s := a2ajstest.Start(t, a2ajstest.Options{})
	c := clientFor(t, s.JSONRPC, agent.V10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.StartTurn(ctx, "travel", "hello", ""); err != nil {
		t.Fatal(err)
	}
	r, err := s.Received(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range r.Requests {
		if strings.HasPrefix(q.Path, "/a2a/") {
			n++
			if q.Version == nil || *q.Version != "1.0" {
				t.Errorf("request %+v lacks A2A-Version: 1.0", q)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d requests to the endpoint, want 1", n)
	}
}

// TestPinned03AgainstJSAgent: an agent pinned to 0.3 that only speaks 1.0
// answers VERSION_NOT_SUPPORTED, a permanent error (no card is read and
// nothing is retried: the operator pinned it).
func TestPinned03AgainstJSAgent(t *testing.T) {
	s := a2ajstest.Start(t, a2ajstest.Options{})
	c := clientFor(t, s.JSONRPC, agent.V03)
	_, err := c.StartTurn(context.Background(), "travel", "hello", "")
	var ae *agent.Error
	if !errors.Is(err, agent.ErrVersionNotSupported) || !agent.IsPermanent(err) || !errors.As(err, &ae) || ae.Code != -32009 {
		t.Fatalf("err = %v", err)
	}
}

// TestFollowsAgentFrom03To10 moves one address from the a2a-go 0.3 agent to
// the JS 1.0 agent (a restart onto a new SDK, with a new card) and back:
// the client's cached choice is refused, it reads the card again and the
// same call succeeds on the retry.
func TestFollowsAgentFrom03To10(t *testing.T) {
	a2ajstest.Skip(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	old := agenttest.StartOn(l, true)
	// The 0.3 agent serves JSON-RPC at /; the 1.0 agent at /a2a/jsonrpc.
	// Both cards name their endpoint, so the configured URL is the origin.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	c, err := agent.New(map[string]agent.Target{"travel": {URL: old.URL, Timeout: 5 * time.Second}}, &http.Client{Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.StartTurn(ctx, "travel", "hello", ""); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Status("travel"); st.Generation != agent.V03 {
		t.Fatalf("status %+v, want 0.3", st)
	}
	before, _ := c.Status("travel")
	old.Close()

	js := a2ajstest.Start(t, a2ajstest.Options{Port: port})
	turn, err := c.StartTurn(ctx, "travel", "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTurn(ctx, "travel", turn, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Status("travel")
	if st.Generation != agent.V10 || st.Endpoint != js.JSONRPC || !st.CardReadAt.After(before.CardReadAt) {
		t.Fatalf("status %+v, want 1.0 at %s from a new card read", st, js.JSONRPC)
	}
	js.Close()
	// The JS agent's process is killed: its kept-alive connection can
	// still look idle to the client for a moment, and a POST written on
	// it fails with EOF, which net/http does not retry (not idempotent).
	// An agent's restart costs such a call a retry by its caller; this
	// test is about following the generations, so it starts afresh.
	tr.CloseIdleConnections()

	// And back to 0.3: SendMessage is "method not found" there.
	l, err = net.Listen("tcp", "127.0.0.1:"+itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	back := agenttest.StartOn(l, true)
	defer back.Close()
	if _, err := c.StartTurn(ctx, "travel", "hello", ""); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Status("travel"); st.Generation != agent.V03 {
		t.Fatalf("status %+v, want 0.3 again", st)
	}
}

// TestNoCardProbes: an agent without a card is tried in 1.0, then in 0.3
// when it does not know SendMessage; the card error stays visible.
func TestNoCardProbes(t *testing.T) {
	s := agenttest.Start()
	defer s.Close()
	c := clientFor(t, s.URL, "")
	if _, err := c.StartTurn(context.Background(), "travel", "hello", ""); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Status("travel")
	if st.Generation != agent.V03 || st.ChosenBy != "probe" || !strings.Contains(st.CardError, "agent-card.json") {
		t.Fatalf("status %+v", st)
	}
}

func TestStatusBeforeContact(t *testing.T) {
	c, err := agent.New(map[string]agent.Target{"b": {URL: "http://127.0.0.1:1/", Version: "0.3"}, "a": {URL: "http://127.0.0.1:1/"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sts := c.Statuses()
	if len(sts) != 2 || sts[0].Name != "a" || sts[0].Configured != "auto" || sts[0].Generation != "" || sts[1].Configured != "0.3" {
		t.Fatalf("%+v", sts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Resolve(ctx)
	sts = c.Statuses()
	if sts[0].Generation != agent.V10 || sts[0].ChosenBy != "probe" || sts[0].CardError == "" {
		t.Fatalf("unreachable card: %+v", sts[0])
	}
	if sts[1].Generation != agent.V03 || sts[1].ChosenBy != "config" || sts[1].CardError != "" {
		t.Fatalf("pinned: %+v", sts[1])
	}
	if _, err := agent.New(map[string]agent.Target{"x": {URL: "http://x/", Version: "2.0"}}, nil); err == nil {
		t.Fatal("want an error for a2a_version 2.0")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
