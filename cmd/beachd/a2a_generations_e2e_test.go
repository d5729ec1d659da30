package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// genPeer is a real agent of one A2A generation.
type genPeer struct {
	gen       string
	url       string                   // the a2a_url an operator configures
	brief     string                   // a message whose task the agent works on before completing
	approvals func() map[string]string // approval id → decision, as received; a repeat fails the test
}

func genPeers(t *testing.T) []genPeer {
	js := a2ajstest.Start(t, a2ajstest.Options{})
	ag := agenttest.StartOn(nil, true)
	t.Cleanup(ag.Close)
	once := func(ids []string, decisions []string) map[string]string {
		out := map[string]string{}
		for i, id := range ids {
			if _, dup := out[id]; dup {
				t.Errorf("approval %s reached the agent twice", id)
			}
			out[id] = decisions[i]
		}
		return out
	}
	return []genPeer{
		{gen: agent.V10, url: js.JSONRPC, brief: "slow:Today's tasks", approvals: func() map[string]string {
			r, err := js.Received(context.Background())
			if err != nil {
				return nil
			}
			var ids, decs []string
			for _, a := range r.Approvals {
				id, _ := a.Response["approvalId"].(string)
				dec, _ := a.Response["decision"].(string)
				ids, decs = append(ids, id), append(decs, dec)
			}
			return once(ids, decs)
		}},
		{gen: agent.V03, url: ag.URL, brief: "Today's tasks", approvals: func() map[string]string {
			var ids, decs []string
			for _, r := range ag.Received() {
				ids, decs = append(ids, r.Response.ApprovalID), append(decs, r.Response.Decision)
			}
			return once(ids, decs)
		}},
	}
}

// TestA2AGenerationsEndToEnd runs beachd (a2a_version auto) against the JS
// SDK 1.x agent and the a2a-go 0.3 agent: GET /v1/agents shows the
// generation the card chose; a cron turn runs and its result (a task the
// agent works on, polled to its end) is delivered; an approval held in
// input-required is decided through the API, the decision is injected once,
// and the agent completes the task with it.
func TestA2AGenerationsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server")
	}
	for _, p := range genPeers(t) {
		t.Run("a2a-"+p.gen, func(t *testing.T) {
			d := startDev(t, func(c *config.Config) {
				c.Agents["travel"] = config.AgentConfig{A2AURL: p.url, Timeout: 10 * time.Second}
				c.Schedules = []config.ScheduleConfig{{Name: "brief", Cron: "0 8 * * *", Agent: "travel", Message: p.brief,
					To: []envelope.Recipient{{Channel: envelope.ChannelWebhook, Endpoint: devSinkEndpoint}}}}
			})
			var v api.AgentView
			poll.Eventually(t, 10*time.Second, "the agent card read at start", func() bool {
				d.do("GET", "/v1/agents/travel", nil, "", &v)
				return v.Generation != ""
			})
			if v.Generation != p.gen || v.Binding != agent.BindingJSONRPC || v.ChosenBy != "card" || v.CardReadAt == nil || v.CardError != "" || v.A2AVersion != "auto" {
				t.Fatalf("GET /v1/agents/travel: %+v, want %s by card", v, p.gen)
			}

			// A cron turn.
			d.runNow("brief")
			d.waitSink("the scheduled turn's result at the sink", "Today's brief: Today's tasks")

			// An approval held in input-required.
			client, err := agent.New(map[string]agent.Target{"travel": {URL: p.url}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id := "e2e_" + strings.ReplaceAll(p.gen, ".", "_")
			turn, err := client.StartTurn(ctx, "travel", "approve:"+id, "")
			if err != nil {
				t.Fatal(err)
			}
			env, err := client.WaitTurn(ctx, "travel", turn, 20*time.Millisecond)
			if err != nil || env.Meta.FinalizedBy != "suspended" {
				t.Fatalf("held turn: %+v, %v", env, err)
			}
			body, _ := json.Marshal(map[string]any{"envelope": env, "agent": "travel",
				"to": []map[string]string{{"channel": "webhook", "endpoint": devSinkEndpoint}}})
			if code := d.do("POST", "/v1/deliveries", bytes.NewReader(body), "application/json", nil); code != 202 {
				t.Fatalf("post the approval request: %d", code)
			}
			poll.Eventually(t, 10*time.Second, "the approval to be pending", func() bool { return d.approvalState(id) == "pending" })
			if code := d.do("POST", "/v1/approvals/"+id+"/decision", strings.NewReader(`{"decision":"granted","reason":"ok"}`), "application/json", nil); code != 200 {
				t.Fatalf("decide: %d", code)
			}
			poll.Eventually(t, 30*time.Second, "the decision at the agent", func() bool { return p.approvals()[id] == "granted" })
			for {
				env, err = client.WaitTurn(ctx, "travel", &agent.Turn{TaskID: turn.TaskID}, 20*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if env.Meta.FinalizedBy == "complete" {
					break
				}
				if ctx.Err() != nil {
					t.Fatal("the held task did not complete after the decision")
				}
			}
			if env.Text("response") != "Resumed." {
				t.Fatalf("resumed task: %q", env.Text("response"))
			}
			if got := p.approvals(); len(got) != 1 {
				t.Fatalf("agent received %v, want one decision", got)
			}
		})
	}
}

// TestDevAgentGenerations: `beachd dev`'s agent speaks 1.0 by default and
// 0.3 with --agent-a2a 0.3; beachd picks each from the card the dev agent
// publishes, and injected decisions reach it either way.
func TestDevAgentGenerations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server")
	}
	for _, gen := range []string{agent.V10, agent.V03} {
		t.Run("a2a-"+gen, func(t *testing.T) {
			d := startDev(t, func(c *config.Config) { c.DevAgentA2A = gen })
			var v api.AgentView
			poll.Eventually(t, 10*time.Second, "the dev agent's card read at start", func() bool {
				d.do("GET", "/v1/agents/"+devAgentName, nil, "", &v)
				return v.Generation != ""
			})
			if v.Generation != gen || v.ChosenBy != "card" || v.CardError != "" {
				t.Fatalf("dev agent: %+v, want %s by card", v, gen)
			}
			id := "dev_" + strings.ReplaceAll(gen, ".", "_")
			d.requestApproval(id, `[{"channel":"webhook","endpoint":"dev-sink"}]`)
			if code := d.do("POST", "/v1/approvals/"+id+"/decision", strings.NewReader(`{"decision":"denied","reason":"no"}`), "application/json", nil); code != 200 {
				t.Fatalf("decide: %d", code)
			}
			poll.Eventually(t, 30*time.Second, "the decision at the dev agent", func() bool {
				for _, r := range d.agentReceived().Received {
					if r.ApprovalResponse.ApprovalID == id && r.ApprovalResponse.Decision == "denied" {
						return true
					}
				}
				return false
			})
			var list struct{ Agents []api.AgentView }
			d.do("GET", "/v1/agents", nil, "", &list)
			if len(list.Agents) != 1 || list.Agents[0].Name != devAgentName || list.Agents[0].Generation != gen {
				t.Fatalf("GET /v1/agents: %+v", list)
			}
			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"agents", "list", "--url", d.base, "--api-key", d.key},
				func(string) string { return "" }, &out, &errb)
			if code != 0 || !strings.Contains(out.String(), "A2A_VERSION") || !strings.Contains(out.String(), " "+gen+" ") {
				t.Fatalf("beachd agents list: exit %d\n%s%s", code, out.String(), errb.String())
			}
		})
	}
}

// config check names a2a_version when its value is not one beachd knows.
func TestConfigCheckA2AVersion(t *testing.T) {
	dir := t.TempDir()
	for v, ok := range map[string]bool{"auto": true, `"1.0"`: true, "1.0": true, "0.3": true, "2.0": false, "v1": false} {
		path := filepath.Join(dir, "c.yaml")
		os.WriteFile(path, []byte(fmt.Sprintf("listen: 127.0.0.1:1\napi_keys: [\"0123456789abcdef\"]\nagents: {a: {a2a_url: \"http://127.0.0.1:9/\", a2a_version: %s}}\n", v)), 0o600)
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"config", "check", "--config", path}, func(string) string { return "" }, &out, &errb)
		if ok != (code == 0) || (!ok && !strings.Contains(errb.String(), "agents.a.a2a_version")) {
			t.Errorf("a2a_version %s: exit %d, %q", v, code, errb.String())
		}
	}
}
