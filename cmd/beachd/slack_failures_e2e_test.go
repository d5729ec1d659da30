package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/slack/slacktest"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// slackDelivery is a delivery as GET /v1/deliveries/{id} shows it.
type slackDelivery struct {
	ID, To, State, DeadReason, LastError, ProviderID string
	Attempts                                         int
	Extra                                            map[string]string
}

// sendSlack queues a message saying text to a Slack address and returns
// its delivery id.
func (d *devDaemon) sendSlack(to, text string) string {
	d.t.Helper()
	env := map[string]any{"role": "agent", "parts": []any{map[string]any{"text": text, "metadata": map[string]any{"partType": "response"}}},
		"meta": map[string]any{"sessionId": "ses_slack", "turnId": "turn_" + fmt.Sprint(time.Now().UnixNano()),
			"producedAt": time.Now().UTC().Format(time.RFC3339), "finalizedBy": "complete"}}
	body, _ := json.Marshal(map[string]any{"envelope": env, "agent": devAgentName,
		"to": []any{map[string]any{"channel": "slack", "address": to}}})
	var out struct{ Deliveries []struct{ ID string } }
	if code := d.do("POST", "/v1/deliveries", bytes.NewReader(body), "application/json", &out); code != 202 || len(out.Deliveries) != 1 {
		d.t.Fatalf("send to %s: %d %+v", to, code, out)
	}
	return out.Deliveries[0].ID
}

func (d *devDaemon) delivery(id string) slackDelivery {
	var out slackDelivery
	d.do("GET", "/v1/deliveries/"+id, nil, "", &out)
	return out
}

// waitDelivery waits for delivery id to reach state.
func (d *devDaemon) waitDelivery(id, state string) slackDelivery {
	d.t.Helper()
	var got slackDelivery
	poll.Eventually(d.t, 30*time.Second, "delivery "+id+" "+state, func() bool {
		got = d.delivery(id)
		return got.State == state
	})
	return got
}

// Slack refusing a message, end to end against the stateful Slack fake: a
// channel the bot left (not_in_channel) or cannot see (channel_not_found)
// is a dead letter after one attempt with a reason that says what to do,
// and so is the answer to a mention that arrives from a channel the bot
// has left; a 429 storm is waited out as Slack asks (Retry-After) with
// every message posted once; a token Slack refuses (invalid_auth,
// token_revoked, token_expired) is a dead letter at once, named in
// /readyz's details and on the console's Slack screen until a call
// succeeds again.
func TestSlackRefusalsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	fake := slacktest.StartFake(t)
	fake.Scopes = "chat:write,im:write,users:read,users:read.email,im:history,app_mentions:read,channels:history"
	d := startDev(t, func(c *config.Config) {
		c.Slack = &config.SlackConfig{BotToken: "xoxb-1234567890-abcdefghij", SigningSecret: e2eSlackSecret, APIBaseURL: fake.URL}
	})
	attemptsTo := func(channel string) (n int) {
		for _, a := range fake.Attempts() {
			if a.Channel == channel {
				n++
			}
		}
		return n
	}

	// A channel the bot left, and one it cannot see.
	fake.SetFaults(slacktest.Faults{Refuse: map[string]string{"C0LEFT001": "not_in_channel", "C0GONE001": "channel_not_found"}})
	left, gone, ok := d.sendSlack("C0LEFT001", "to a channel the bot left"), d.sendSlack("C0GONE001", "to a channel gone"), d.sendSlack("U0ANN0001", "to a user")
	d.waitDelivery(ok, "sent")
	for id, want := range map[string]string{left: "slack not_in_channel: the bot is not a member of the channel: invite it", gone: "slack channel_not_found"} {
		got := d.waitDelivery(id, "dead")
		if got.Attempts != 1 || !strings.Contains(got.DeadReason, want) || !strings.HasPrefix(got.DeadReason, "permanent failure") {
			t.Errorf("%s: %d attempts, dead reason %q; want one attempt and %q", got.To, got.Attempts, got.DeadReason, want)
		}
	}

	// A mention from a channel the bot has left (Slack delivers events of
	// a channel it was in a moment ago): the turn runs, its answer into
	// the thread is a dead letter at once.
	const mentionTS = "1767225600.000700"
	if st := slackEvent(t, d.base, e2eSlackSecret, fake.Team, "Ev0LEFT001", map[string]any{"type": "app_mention", "channel": "C0LEFT001",
		"user": "U0ANN0001", "text": "<@" + fake.BotUser + "> still there?", "ts": mentionTS, "event_ts": mentionTS}, ""); st != http.StatusOK {
		t.Fatalf("mention event: %d", st)
	}
	var answer slackDelivery
	poll.Eventually(t, 30*time.Second, "the answer to the mention, dead", func() bool {
		var out struct{ Deliveries []slackDelivery }
		d.do("GET", "/v1/deliveries?channel=slack&to=C0LEFT001&state=dead", nil, "", &out)
		for _, dl := range out.Deliveries {
			if dl.ID != left {
				answer = dl
				return true
			}
		}
		return false
	})
	if answer.Attempts != 1 || !strings.Contains(answer.DeadReason, "not_in_channel") || answer.Extra["thread_ts"] != mentionTS {
		t.Errorf("the answer in the thread of a channel the bot left: %+v", answer)
	}
	if n := attemptsTo("C0LEFT001"); n != 2 {
		t.Errorf("%d posts to the channel the bot left, want 2 (the message and the answer, once each)", n)
	}

	// A 429 storm: six answers of 429 (Retry-After: 1) to four messages.
	fake.SetFaults(slacktest.Faults{RateLimited: 6, RetryAfter: 1})
	before := len(fake.Attempts())
	var storm []string
	for i := range 4 {
		storm = append(storm, d.sendSlack("U0STORM01", fmt.Sprintf("storm message %d", i)))
	}
	for _, id := range storm {
		d.waitDelivery(id, "sent")
	}
	all := fake.Attempts()[before:]
	oks, limited := map[string]int{}, 0
	last429 := map[string]time.Time{}
	for _, a := range all {
		if a.Answer == "ratelimited" {
			limited++
			last429[a.Text] = a.At
			continue
		}
		oks[a.Text]++
		// Retry-After honoured: never sooner than Slack asked.
		if at, ok := last429[a.Text]; ok && a.At.Sub(at) < time.Second {
			t.Errorf("%q posted %v after its 429 asked for 1s", a.Text, a.At.Sub(at))
		}
	}
	if limited != 6 || len(all) != 10 || len(oks) != 4 {
		t.Errorf("%d attempts (%d answered 429), %d messages posted; want 10, 6 and 4", len(all), limited, len(oks))
	}
	for text, n := range oks {
		if n != 1 {
			t.Errorf("%q posted %d times", text, n)
		}
	}

	// A token Slack refuses: dead at once, told in /readyz and on the
	// console until a call succeeds.
	for _, code := range []string{"invalid_auth", "token_revoked", "token_expired"} {
		fake.SetFaults(slacktest.Faults{Token: code})
		id := d.sendSlack("U0ANN0001", "with a token Slack refuses: "+code)
		got := d.waitDelivery(id, "dead")
		if got.Attempts != 1 || !strings.Contains(got.DeadReason, "slack "+code+": the bot token") {
			t.Errorf("%s: %d attempts, dead reason %q", code, got.Attempts, got.DeadReason)
		}
	}
	var ready struct {
		Slack struct{ Problem, Team, BotUser string }
	}
	d.do("GET", "/readyz", nil, "", &ready)
	if !strings.HasPrefix(ready.Slack.Problem, "token_expired: the bot token expired") || ready.Slack.BotUser != fake.BotUser {
		t.Errorf("/readyz slack details: %+v", ready.Slack)
	}
	if code, page := d.page("/ui/slack"); code != 200 || !strings.Contains(page, "Slack refuses the bot token") || !strings.Contains(page, "token_expired") {
		t.Errorf("the console's Slack screen: %d\n%s", code, page)
	}
	// The token fixed, the dead letter retried: posted, and the warning gone.
	fake.SetFaults(slacktest.Faults{})
	if code := d.do("POST", "/v1/deliveries/"+left+"/retry", nil, "", nil); code >= 300 {
		t.Fatalf("retry: %d", code)
	}
	d.waitDelivery(left, "sent")
	ready.Slack.Problem = ""
	d.do("GET", "/readyz", nil, "", &ready)
	if ready.Slack.Problem != "" {
		t.Errorf("/readyz still names a problem after a post succeeded: %+v", ready.Slack)
	}
	if _, page := d.page("/ui/slack"); strings.Contains(page, "Slack refuses the bot token") || strings.Contains(page, "lacks scopes") {
		t.Errorf("the Slack screen still warns:\n%s", page)
	}
}

// page GETs a console page with the API key.
func (d *devDaemon) page(path string) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequest("GET", d.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+d.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}
