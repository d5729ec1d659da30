package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/envelope"
)

// turnAndDecision runs a Beach turn suspended on an approval, injects the
// decision and waits for the agent to hold it.
func turnAndDecision(t *testing.T, c *agent.Client, s *a2ajstest.Server, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	turn, err := c.StartTurn(ctx, "travel", "approve:"+id, "")
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.WaitTurn(ctx, "travel", turn, 10*time.Millisecond)
	if err != nil || env.Meta.FinalizedBy != "suspended" {
		t.Fatalf("turn: %+v, %v", env, err)
	}
	resp := envelope.ApprovalResponse{ApprovalID: id, Decision: "granted", DecidedAt: time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)}
	if err := c.Inject(ctx, "travel", turn.ContextID, turn.TaskID, resp); err != nil {
		t.Fatal(err)
	}
	got, err := s.WaitApprovals(ctx, 1)
	if err != nil || got[0].Response["approvalId"] != id {
		t.Fatalf("agent holds %+v, %v", got, err)
	}
}

func bindingClient(t *testing.T, u, version, binding string) *agent.Client {
	t.Helper()
	c, err := agent.New(map[string]agent.Target{"travel": {URL: u, Version: version, Binding: binding, Timeout: 5 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPinned10ReadsCardForBinding: a2a_version 1.0 pins the generation, not
// the binding — against an agent (the JS SDK) whose card offers only
// HTTP+JSON, the card's endpoint is used.
func TestPinned10ReadsCardForBinding(t *testing.T) {
	s := a2ajstest.Start(t, a2ajstest.Options{Bindings: "rest"})
	c := bindingClient(t, s.Origin+"/", agent.V10, "")
	turnAndDecision(t, c, s, "appr-pinned-card")
	st, _ := c.Status("travel")
	if st.Generation != agent.V10 || st.Binding != agent.BindingHTTPJSON || st.Endpoint != s.REST || st.ChosenBy != "card" ||
		st.Configured != agent.V10 || st.ConfiguredBinding != "auto" {
		t.Fatalf("status %+v, want 1.0 HTTP+JSON at %s from the card", st, s.REST)
	}
}

// TestPinnedVersionAndBinding: a2a_version 1.0 with a2a_binding http+json
// talks HTTP+JSON to a2a_url without reading the card; the JSON-RPC pin
// against an agent offering both keeps to JSON-RPC.
func TestPinnedVersionAndBinding(t *testing.T) {
	s := a2ajstest.Start(t, a2ajstest.Options{Bindings: "both"})
	for _, tc := range []struct {
		url, version, binding, wantBinding, wantBy string
		card                                       bool
	}{
		{s.REST, agent.V10, "http+json", agent.BindingHTTPJSON, "config", false},
		{s.Origin + "/", agent.VersionAuto, "HTTP+JSON", agent.BindingHTTPJSON, "card", true},
		{s.JSONRPC, agent.V10, "jsonrpc", agent.BindingJSONRPC, "config", false},
	} {
		t.Run(tc.version+"/"+tc.binding, func(t *testing.T) {
			ctx := context.Background()
			before, err := s.Received(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c := bindingClient(t, tc.url, tc.version, tc.binding)
			if _, err := c.StartTurn(ctx, "travel", "hello", ""); err != nil {
				t.Fatal(err)
			}
			st, _ := c.Status("travel")
			if st.Binding != tc.wantBinding || st.ChosenBy != tc.wantBy || st.Generation != agent.V10 || st.ConfiguredBinding != strings.ToLower(tc.binding) {
				t.Fatalf("status %+v, want %s chosen by %s", st, tc.wantBinding, tc.wantBy)
			}
			after, err := s.Received(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cards := 0
			for _, q := range after.Requests[len(before.Requests):] {
				if q.Path == agent.CardPath {
					cards++
				}
			}
			if (cards > 0) != tc.card {
				t.Fatalf("%d card reads, want card read %v", cards, tc.card)
			}
		})
	}
}

func TestParseBinding(t *testing.T) {
	for in, want := range map[string]string{"": "", "auto": "", "AUTO": "", "jsonrpc": agent.BindingJSONRPC,
		"JSONRPC": agent.BindingJSONRPC, "http+json": agent.BindingHTTPJSON, " HTTP+JSON ": agent.BindingHTTPJSON} {
		if got, err := agent.ParseBinding(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"grpc", "rest", "json-rpc", "http"} {
		if _, err := agent.ParseBinding(in); err == nil || !strings.Contains(err.Error(), "a2a_binding") {
			t.Errorf("%q: err = %v, want one naming a2a_binding", in, err)
		}
	}
	for _, tg := range []agent.Target{
		{URL: "http://x/", Version: agent.V03, Binding: "http+json"},
		{URL: "http://x/", Binding: "grpc"},
	} {
		if _, err := agent.New(map[string]agent.Target{"x": tg}, nil); err == nil {
			t.Errorf("%+v: want an error", tg)
		}
	}
}
