package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/channels/slack"
	"github.com/cool-ai/beachd/channels/slack/slacktest"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// slackEvent posts an Events API event_callback as Slack would, signed
// with secret now; retry, when set, is X-Slack-Retry-Num. It returns the
// HTTP status.
func slackEvent(t *testing.T, base, secret, team, eventID string, event map[string]any, retry string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"token": "unused", "team_id": team, "api_app_id": "A0APP0001", "type": "event_callback",
		"event_id": eventID, "event_time": time.Now().Unix(), "event": event})
	req, _ := http.NewRequest("POST", base+slackEventsPath, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	ts := fmt.Sprint(time.Now().Unix())
	req.Header.Set(slack.HeaderTimestamp, ts)
	req.Header.Set(slack.HeaderSignature, slack.SignatureHeader(secret, ts, body))
	if retry != "" {
		req.Header.Set("X-Slack-Retry-Num", retry)
		req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A direct message to the Slack app from a user the agent allows starts a
// conversation with the A2A JS SDK agent; its answer is posted into the
// message's thread by chat.postMessage. Slack's retry of the event starts
// no second turn, the app's own answer coming back as an event starts
// none, and a reply in the thread continues the same conversation.
func TestSlackConversationEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon and the A2A JS agent")
	}
	js := a2ajstest.Start(t, a2ajstest.Options{})
	fake := slacktest.StartFake(t)
	d := startDev(t, func(c *config.Config) {
		c.Slack = &config.SlackConfig{BotToken: "xoxb-1234567890-abcdefghij", SigningSecret: e2eSlackSecret, APIBaseURL: fake.URL}
		c.Agents["js"] = config.AgentConfig{A2AURL: js.JSONRPC, Timeout: 10 * time.Second,
			Inbound: &config.InboundConfig{Slack: []string{"im"}, Allow: []string{"U0ANN0001"}}}
		// The dev agent takes Slack messages too; here the JS agent does.
		dev := c.Agents[devAgentName]
		in := *dev.Inbound
		in.Slack = nil
		dev.Inbound = &in
		c.Agents[devAgentName] = dev
	})
	const (
		user, dm = "U0ANN0001", "D0ANN0001"
		root     = "1767225600.000100"
	)
	// What the agent received whose text starts with prefix.
	received := func(prefix string) []a2ajstest.Seen {
		r, err := js.Received(context.Background())
		if err != nil {
			return nil
		}
		var out []a2ajstest.Seen
		for _, m := range r.Messages {
			for _, p := range m.Parts {
				if p.Kind == "text" && strings.HasPrefix(p.Text, prefix) {
					out = append(out, m)
					break
				}
			}
		}
		return out
	}
	// The posts into the thread.
	inThread := func() []slacktest.Call {
		posts, _, _ := fake.Snapshot()
		var out []slacktest.Call
		for _, p := range posts {
			if p.Channel == dm && p.ThreadTS == root {
				out = append(out, p)
			}
		}
		return out
	}
	message := func(ts, threadTS, text string) map[string]any {
		m := map[string]any{"type": "message", "channel": dm, "channel_type": "im", "user": user, "text": text, "ts": ts, "event_ts": ts}
		if threadTS != "" {
			m["thread_ts"] = threadTS
		}
		return m
	}

	// Someone else's workspace is refused.
	if st := slackEvent(t, d.base, e2eSlackSecret, "T0EVIL001", "Ev0EVIL001", message("1767225500.000001", "", "reply:evil"), ""); st != http.StatusForbidden {
		t.Fatalf("another workspace's event: %d", st)
	}

	first := message(root, "", "reply:first answer")
	if st := slackEvent(t, d.base, e2eSlackSecret, fake.Team, "Ev0FIRST01", first, ""); st != http.StatusOK {
		t.Fatalf("direct message: %d", st)
	}
	// Slack retries the same event (it did not see our answer in time).
	if st := slackEvent(t, d.base, e2eSlackSecret, fake.Team, "Ev0FIRST01", first, "1"); st != http.StatusOK {
		t.Fatalf("retried event: %d", st)
	}
	poll.Eventually(t, 30*time.Second, "the answer posted into the thread", func() bool { return len(inThread()) >= 1 })
	got := received("reply:first answer")
	if len(got) != 1 || !strings.HasPrefix(got[0].ContextID, "cnv_") {
		t.Fatalf("the agent received %+v, want one message in a conversation", got)
	}
	cnv := got[0].ContextID
	answer := inThread()[0]
	if !strings.Contains(answer.Text, "first answer") {
		t.Errorf("answer %+v", answer)
	}
	if beach, _ := got[0].Metadata["beach"].(map[string]any); beach["channel"] != "slack" || beach["from"] != user {
		t.Errorf("turn metadata %v", got[0].Metadata)
	}

	// The app's own answer comes back as a message.im event: not a turn.
	own := message(answer.TS, root, answer.Text)
	own["bot_id"], own["user"] = fake.BotID, fake.BotUser
	if st := slackEvent(t, d.base, e2eSlackSecret, fake.Team, "Ev0ANSWER1", own, ""); st != http.StatusOK {
		t.Fatalf("own answer's event: %d", st)
	}

	// A reply in the thread continues the conversation.
	if st := slackEvent(t, d.base, e2eSlackSecret, fake.Team, "Ev0SECOND1", message("1767225700.000200", root, "reply:second answer"), ""); st != http.StatusOK {
		t.Fatalf("reply in the thread: %d", st)
	}
	poll.Eventually(t, 30*time.Second, "the second answer in the thread", func() bool { return len(inThread()) >= 2 })
	second := received("reply:second answer")
	if len(second) != 1 || second[0].ContextID != cnv {
		t.Fatalf("the reply reached the agent as %+v, want one message in conversation %s", second, cnv)
	}
	// Everything the agent was sent: the two messages, once each (the
	// retry and the app's own answer started nothing).
	if all := received(""); len(all) != 2 {
		t.Fatalf("the agent received %d messages, want 2: %+v", len(all), all)
	}
	if n := len(inThread()); n != 2 {
		t.Fatalf("%d answers in the thread, want 2", n)
	}
}

// devSlackSay writes to the app as a Slack user through
// /dev/slack/message.
func (d *devDaemon) devSlackSay(form url.Values) slack.DevMessage {
	d.t.Helper()
	resp, err := http.PostForm(d.base+"/dev/slack/message", form)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out slack.DevMessage
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		d.t.Fatalf("dev slack message: %d %+v %v", resp.StatusCode, out, err)
	}
	return out
}

// devSlackAnswer waits for the recorded Slack answer in thread that
// contains marker.
func (d *devDaemon) devSlackAnswer(channel, thread, marker string) string {
	d.t.Helper()
	var text string
	poll.Eventually(d.t, 20*time.Second, "the dev agent's Slack answer "+marker, func() bool {
		var got struct{ Messages []slack.Recorded }
		if d.do("GET", "/dev/slack/messages", nil, "", &got) != http.StatusOK {
			return false
		}
		for _, m := range got.Messages {
			if m.Channel == channel && m.ThreadTS == thread && strings.Contains(m.Text, marker) {
				text = m.Text
				return true
			}
		}
		return false
	})
	return text
}

// In `beachd dev` a person writes to the dev agent as a Slack user: a
// direct message through /dev/slack/message starts a conversation whose
// answer is recorded in the message's thread, and a message in that
// thread continues it; a mention in a channel starts another.
func TestDevSlackConversation(t *testing.T) {
	d := startDev(t)
	first := d.devSlackSay(url.Values{"user": {"U0ANN0001"}, "text": {"Flights to Lisbon?"}})
	if first.Channel != "D0ANN0001" || first.ThreadTS != first.TS {
		t.Fatalf("first message %+v", first)
	}
	a1 := d.devSlackAnswer(first.Channel, first.ThreadTS, "turn 1 of conversation cnv_")
	cnv := regexp.MustCompile(`cnv_[0-9a-z]+`).FindString(a1)
	d.devSlackSay(url.Values{"user": {"U0ANN0001"}, "text": {"For six, please"}, "thread_ts": {first.ThreadTS}})
	d.devSlackAnswer(first.Channel, first.ThreadTS, "turn 2 of conversation "+cnv)
	m := d.devSlackSay(url.Values{"user": {"U0BOB0001"}, "channel": {"C0DESK001"}, "text": {"Anyone there?"}})
	a3 := d.devSlackAnswer("C0DESK001", m.ThreadTS, "turn 1 of conversation cnv_")
	if strings.Contains(a3, cnv) {
		t.Fatalf("a mention in a channel continued the direct message's conversation: %s", a3)
	}
	// It starts turns without a key on loopback: a page the developer
	// visits cannot make the browser post to it.
	req, _ := http.NewRequest("POST", d.base+"/dev/slack/message",
		strings.NewReader(url.Values{"user": {"U0EVE0001"}, "text": {"from a web page"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site post to /dev/slack/message: %d, want 403", resp.StatusCode)
	}
}

// A conversation started by a mention in a channel continues with a reply in
// its thread that does not mention the app (a message.channels event) by
// someone in the conversation; a reply there by someone else, and a
// channel message outside a conversation's thread, start nothing.
func TestSlackThreadReplyEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	fake := slacktest.StartFake(t)
	d := startDev(t, func(c *config.Config) {
		c.Slack = &config.SlackConfig{BotToken: "xoxb-1234567890-abcdefghij", SigningSecret: e2eSlackSecret, APIBaseURL: fake.URL}
	})
	const ch, root = "C0DESK001", "1767225600.000100"
	inThread := func() []string {
		posts, _, _ := fake.Snapshot()
		var out []string
		for _, p := range posts {
			if p.Channel == ch && p.ThreadTS == root {
				out = append(out, p.Text)
			}
		}
		return out
	}
	event := func(id string, ev map[string]any) {
		t.Helper()
		if st := slackEvent(t, d.base, e2eSlackSecret, fake.Team, id, ev, ""); st != http.StatusOK {
			t.Fatalf("event %s: %d", id, st)
		}
	}
	reply := func(user, ts, thread, text string) map[string]any {
		return map[string]any{"type": "message", "channel": ch, "channel_type": "channel", "user": user, "text": text, "ts": ts, "thread_ts": thread}
	}
	event("Ev0MENTION1", map[string]any{"type": "app_mention", "channel": ch, "user": "U0ANN0001", "text": "<@" + fake.BotUser + "> flights to Lisbon?", "ts": root})
	poll.Eventually(t, 20*time.Second, "the first answer in the thread", func() bool { return len(inThread()) == 1 })
	cnv := regexp.MustCompile(`cnv_[0-9a-z]+`).FindString(inThread()[0])
	if cnv == "" || !strings.Contains(inThread()[0], "turn 1 of conversation") {
		t.Fatalf("first answer %q", inThread()[0])
	}
	// Someone else's reply, a top-level message and a reply in a thread that
	// is no conversation: nothing.
	event("Ev0OTHER01", reply("U0BOB0001", "1767225600.000200", root, "me too"))
	event("Ev0TOPLVL1", map[string]any{"type": "message", "channel": ch, "channel_type": "channel", "user": "U0ANN0001", "text": "lunch?", "ts": "1767225600.000300"})
	event("Ev0STRAY01", reply("U0ANN0001", "1767225600.000400", "1767225000.000001", "in another thread"))
	// The participant's reply without a mention continues the conversation.
	event("Ev0REPLY01", reply("U0ANN0001", "1767225600.000500", root, "for six, please"))
	poll.Eventually(t, 20*time.Second, "the second answer in the thread", func() bool { return len(inThread()) >= 2 })
	if got := inThread(); len(got) != 2 || !strings.Contains(got[1], "turn 2 of conversation "+cnv) {
		t.Fatalf("answers in the thread: %q", got)
	}
	posts, _, _ := fake.Snapshot()
	if len(posts) != 2 {
		t.Fatalf("%d posts, want the two answers: %+v", len(posts), posts)
	}
}
