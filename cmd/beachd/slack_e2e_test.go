package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/slack"
	"github.com/cool-ai/beachd/channels/slack/slacktest"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

const e2eSlackSecret = "8f742231b10e8888abcd99aaabbb85a5"

// slackButtons finds the Approve and Deny values of approvalID in a
// posted message's blocks.
func slackButtons(t *testing.T, blocks, approvalID string) (approve, deny string) {
	t.Helper()
	var bs []struct {
		Type     string `json:"type"`
		BlockID  string `json:"block_id"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(blocks), &bs); err != nil {
		t.Fatalf("blocks: %v\n%s", err, blocks)
	}
	for _, b := range bs {
		if b.Type == "actions" && b.BlockID == "approval:"+approvalID {
			for _, e := range b.Elements {
				switch e.ActionID {
				case "beachd_approve":
					approve = e.Value
				case "beachd_deny":
					deny = e.Value
				}
			}
		}
	}
	return approve, deny
}

// clickSlack posts a block_actions payload as Slack would, signed at ts
// with secret, and returns the HTTP status.
func clickSlack(t *testing.T, base, secret string, ts time.Time, user, channel, msgTS, actionID, value, actionTS string) int {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user}, "team": map[string]any{"id": "T0001"},
		"channel": map[string]any{"id": channel}, "container": map[string]any{"type": "message", "message_ts": msgTS, "channel_id": channel},
		"actions": []map[string]any{{"type": "button", "action_id": actionID, "value": value, "action_ts": actionTS}},
	})
	body := url.Values{"payload": {string(payload)}}.Encode()
	req, _ := http.NewRequest("POST", base+slackInteractionsPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	sts := fmt.Sprint(ts.Unix())
	req.Header.Set(slack.HeaderTimestamp, sts)
	req.Header.Set(slack.HeaderSignature, slack.SignatureHeader(secret, sts, []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// An approval sent to a Slack user and to an SMS number, decided by the
// Slack button: the decision reaches the A2A JS SDK agent once, the Slack
// message is rewritten without its buttons, and the SMS code is void. A
// replayed click, a click signed badly or too long ago, and a click by
// someone who was not asked decide nothing.
func TestSlackApprovalEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon and the A2A JS agent")
	}
	js := a2ajstest.Start(t, a2ajstest.Options{})
	fake := slacktest.StartFake(t)
	d := startDev(t, func(c *config.Config) {
		c.Slack = &config.SlackConfig{BotToken: "xoxb-1234567890-abcdefghij", SigningSecret: e2eSlackSecret, APIBaseURL: fake.URL}
		c.Agents["js"] = config.AgentConfig{A2AURL: js.JSONRPC, Timeout: 10 * time.Second}
	})
	// A turn held in input-required at the JS agent, on an approval
	// request; its envelope goes to Slack and SMS.
	request := func(id, to string) {
		client, err := agent.New(map[string]agent.Target{"js": {URL: js.JSONRPC}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		turn, err := client.StartTurn(ctx, "js", "approve:"+id, "")
		if err != nil {
			t.Fatal(err)
		}
		env, err := client.WaitTurn(ctx, "js", turn, 20*time.Millisecond)
		if err != nil || env.Meta.FinalizedBy != "suspended" {
			t.Fatalf("held turn: %+v, %v", env, err)
		}
		body, _ := json.Marshal(map[string]any{"envelope": env, "agent": "js", "to": json.RawMessage(to)})
		var out map[string]any
		if code := d.do("POST", "/v1/deliveries", bytes.NewReader(body), "application/json", &out); code != 202 {
			t.Fatalf("approval request: %d %v", code, out)
		}
	}
	injected := func() []map[string]any {
		r, err := js.Received(context.Background())
		if err != nil {
			return nil
		}
		var out []map[string]any
		for _, a := range r.Approvals {
			out = append(out, a.Response)
		}
		return out
	}

	request("appr_slack_1", `[{"channel":"slack","address":"U012AB3CD"},{"channel":"sms","address":"+15555550100"}]`)
	var post slacktest.Call
	poll.Eventually(t, 20*time.Second, "the Slack message", func() bool {
		posts, _, _ := fake.Snapshot()
		for _, p := range posts {
			if strings.Contains(p.Blocks, "approval:appr_slack_1") {
				post = p
				return true
			}
		}
		return false
	})
	approve, _ := slackButtons(t, post.Blocks, "appr_slack_1")
	if !strings.HasPrefix(approve, "appr_slack_1:") || post.Channel != "D012AB3CD" {
		t.Fatalf("message to %s, Approve carries %q", post.Channel, approve)
	}
	code := smsCode(t, d, "+15555550100")

	// Refused before anything is read: a bad signature, a stale one.
	if st := clickSlack(t, d.base, "00000000000000000000000000000000", time.Now(), "U012AB3CD", post.Channel, post.TS, "beachd_approve", approve, "1.1"); st != 401 {
		t.Fatalf("badly signed click: %d", st)
	}
	if st := clickSlack(t, d.base, e2eSlackSecret, time.Now().Add(-6*time.Minute), "U012AB3CD", post.Channel, post.TS, "beachd_approve", approve, "1.2"); st != 401 {
		t.Fatalf("stale click: %d", st)
	}
	// Someone else pressing the button decides nothing.
	if st := clickSlack(t, d.base, e2eSlackSecret, time.Now(), "U0MALLORY", post.Channel, post.TS, "beachd_approve", approve, "1.3"); st != 200 {
		t.Fatalf("click: %d", st)
	}
	if s := d.approvalState("appr_slack_1"); s != "pending" {
		t.Fatalf("a click by someone not asked made it %q", s)
	}

	// The user asked approves.
	if st := clickSlack(t, d.base, e2eSlackSecret, time.Now(), "U012AB3CD", post.Channel, post.TS, "beachd_approve", approve, "1767225600.100001"); st != 200 {
		t.Fatalf("click: %d", st)
	}
	poll.Eventually(t, 30*time.Second, "the decision injected into the JS agent", func() bool { return len(injected()) == 1 })
	got := injected()[0]
	if got["approvalId"] != "appr_slack_1" || got["decision"] != "granted" || got["decidedBy"] != "U012AB3CD" {
		t.Fatalf("agent received %v", got)
	}
	var upd slacktest.Call
	poll.Eventually(t, 20*time.Second, "the Slack message rewritten", func() bool {
		_, ups, _ := fake.Snapshot()
		for _, u := range ups {
			if u.Channel == post.Channel && u.TS == post.TS {
				upd = u
				return true
			}
		}
		return false
	})
	if !strings.Contains(upd.Text, "Approved") || !strings.Contains(upd.Text, "U012AB3CD") || strings.Contains(upd.Blocks, "beachd_approve") {
		t.Errorf("update: %+v", upd)
	}

	// The SMS code is void; the replayed click is a duplicate; neither
	// reaches the agent.
	res := d.devReply("sms", "+15555550100", "NO "+code)
	if res.Outcome != "already-decided" {
		t.Errorf("the SMS answer after the Slack decision: %+v", res)
	}
	if st := clickSlack(t, d.base, e2eSlackSecret, time.Now(), "U012AB3CD", post.Channel, post.TS, "beachd_approve", approve, "1767225600.100001"); st != 200 {
		t.Fatalf("replayed click: %d", st)
	}
	time.Sleep(300 * time.Millisecond) // a wrong second injection would happen now
	if n := len(injected()); n != 1 {
		t.Fatalf("the agent received %d decisions for one approval", n)
	}
	if s := d.approvalState("appr_slack_1"); s != "granted" {
		t.Fatalf("state %q", s)
	}
	// The one not asked was told so, privately.
	_, _, eph := fake.Snapshot()
	var toMallory bool
	for _, e := range eph {
		toMallory = toMallory || (e.User == "U0MALLORY" && strings.Contains(e.Text, "not yours"))
	}
	if !toMallory {
		t.Errorf("no ephemeral note to the user not asked: %+v", eph)
	}
}

// `beachd dev` records Slack messages, and its /dev/slack/click presses a
// button as a Slack user through the signed interactivity endpoint: the
// approval is decided and the recorded message rewritten without buttons.
func TestSlackDevRecordsAndClicks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	d := startDev(t)
	d.requestApproval("appr_slack_dev", `[{"channel":"slack","address":"U012AB3CD"}]`)
	type recorded struct {
		Channel, TS, Text string
		UpdatedAt         time.Time
		Ephemeral         bool
		User              string
		Buttons           []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"buttons"`
	}
	var msgs struct{ Messages []recorded }
	var msg recorded
	poll.Eventually(t, 20*time.Second, "the recorded Slack message", func() bool {
		d.do("GET", "/dev/slack/messages", nil, "", &msgs)
		for _, m := range msgs.Messages {
			if len(m.Buttons) == 2 {
				msg = m
				return true
			}
		}
		return false
	})
	click := func(user string) int {
		form := url.Values{"user": {user}, "channel": {msg.Channel}, "value": {msg.Buttons[0].Value}, "action": {msg.Buttons[0].ActionID}}
		resp, err := http.PostForm(d.base+"/dev/slack/click", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := click("U0SOMEONE"); st != 200 {
		t.Fatalf("click: %d", st)
	}
	if s := d.approvalState("appr_slack_dev"); s != "pending" {
		t.Fatalf("someone else's click made it %s", s)
	}
	if st := click("U012AB3CD"); st != 200 {
		t.Fatalf("click: %d", st)
	}
	defer func() {
		if t.Failed() {
			var raw json.RawMessage
			d.do("GET", "/dev/slack/messages", nil, "", &raw)
			var dl json.RawMessage
			d.do("GET", "/v1/deliveries?state=dead", nil, "", &dl)
			t.Logf("recorded: %s\ndead: %s", raw, dl)
		}
	}()
	poll.Eventually(t, 20*time.Second, "the recorded message rewritten", func() bool {
		msgs.Messages = nil // decode afresh: fields left out must not keep old values
		d.do("GET", "/dev/slack/messages", nil, "", &msgs)
		for _, m := range msgs.Messages {
			if m.TS == msg.TS && !m.UpdatedAt.IsZero() && len(m.Buttons) == 0 && strings.Contains(m.Text, "Approved") {
				return true
			}
		}
		return false
	})
	if s := d.approvalState("appr_slack_dev"); s != "granted" {
		t.Fatalf("state %s", s)
	}
	note := false
	for _, m := range msgs.Messages {
		note = note || (m.Ephemeral && m.User == "U0SOMEONE")
	}
	if !note {
		t.Errorf("no note for the user not asked: %+v", msgs.Messages)
	}
}

// heldSlack holds each Slack post of a marked approval request, before it
// reaches Slack (hold "before") or after Slack answered and before the
// dispatcher records its ts (hold "after"), until the test lets it go.
type heldSlack struct {
	channels.Deliverer
	mu      sync.Mutex
	holds   map[string]string // approval id → "before" or "after"
	entered chan string
	release chan struct{}
}

func (h *heldSlack) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	h.mu.Lock()
	var where string
	if job.Delivery.Extra[slack.ExtraUpdate] == "" {
		for _, id := range job.Delivery.ApprovalIDs {
			if w, ok := h.holds[id]; ok {
				where = w
				delete(h.holds, id)
			}
		}
	}
	h.mu.Unlock()
	if where == "before" {
		h.entered <- where
		<-h.release
	}
	res, err := h.Deliverer.Deliver(ctx, job)
	if where == "after" {
		h.entered <- where
		<-h.release
	}
	return res, err
}

// A Slack message whose approval is decided while its post is on its way
// is rewritten once its ts is recorded: decided before the post reached
// Slack, and decided after Slack answered but before the ts was recorded
// (the rewrite that followed the decision read the deliveries without
// it). The record writes a follow-up naming the message; the sweeper
// fires it.
func TestSlackMessageDecidedInFlightIsRewritten(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	fake := slacktest.StartFake(t)
	held := &heldSlack{holds: map[string]string{}, entered: make(chan string), release: make(chan struct{})}
	d := startDevApp(t, func(a *app) {
		held.Deliverer = a.deliverers[envelope.ChannelSlack]
		a.deliverers[envelope.ChannelSlack] = held
	}, func(c *config.Config) {
		c.Slack = &config.SlackConfig{BotToken: "xoxb-1234567890-abcdefghij", SigningSecret: e2eSlackSecret, APIBaseURL: fake.URL}
	})
	for _, where := range []string{"before", "after"} {
		id := "appr_inflight_" + where
		held.mu.Lock()
		held.holds[id] = where
		held.mu.Unlock()
		d.requestApproval(id, `[{"channel":"slack","address":"U012AB3CD"}]`)
		select {
		case <-held.entered:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the post was not held", where)
		}
		body := strings.NewReader(`{"decision":"denied","reason":"decided while the post was on its way"}`)
		var out map[string]any
		if code := d.do("POST", "/v1/approvals/"+id+"/decision", body, "application/json", &out); code != 200 {
			t.Fatalf("%s: decide: %d %v", where, code, out)
		}
		held.release <- struct{}{}
		var post slacktest.Call
		poll.Eventually(t, 20*time.Second, where+": the Slack message rewritten", func() bool {
			posts, ups, _ := fake.Snapshot()
			for _, p := range posts {
				if strings.Contains(p.Blocks, "approval:"+id) {
					post = p
				}
			}
			for _, u := range ups {
				if post.TS != "" && u.Channel == post.Channel && u.TS == post.TS {
					return strings.Contains(u.Text, "Denied") && !strings.Contains(u.Blocks, "beachd_approve")
				}
			}
			return false
		})
	}
}
