package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// TestA2APushEndToEnd runs beachd against the JS SDK 1.x agent with
// pushNotifications on in its card, then off. A scheduled turn and a
// conversation turn (an SMS through the dev channel) each start a task the
// agent works on; their answers reach the person. With pushes on, the
// agent posts its updates to beachd's push URL and beachd asks nothing
// after the last push (no GetTask); the schedule's run says it was
// answered by push, and so does the conversation's turn (in /v1/turns and
// beside the person's message in its conversation). With pushes off, the
// answers come by polling.
func TestA2APushEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server")
	}
	for _, push := range []bool{true, false} {
		name, want := "push-off", agent.AnsweredByPoll
		if push {
			name, want = "push-on", agent.AnsweredByPush
		}
		t.Run(name, func(t *testing.T) {
			js := a2ajstest.Start(t, a2ajstest.Options{Push: push})
			d := startDev(t, devBrief(js.JSONRPC))
			// The scheduled turn.
			d.runNow("brief")
			d.waitSink("the scheduled turn's result at the sink", "Today's brief: Today's tasks")
			if got := d.succeededRun(10*time.Second, "the run's record"); got != want {
				t.Errorf("the run was answered by %q, want %q", got, want)
			}
			gets := checkPushes(t, js, push, 1)

			// A conversation turn.
			d.smsTurn("+447700900778")
			if n := checkPushes(t, js, push, 2); !push && n <= gets {
				t.Errorf("pushes off: the conversation turn was not polled (%d GetTask before it, %d after)", gets, n)
			}
			// The turn says how its answer arrived, in the turns list and
			// on its conversation (beside the person's message).
			turn := d.answeredTurn()
			if got := turn.AnsweredBy; got != want {
				t.Errorf("the conversation turn was answered by %q, want %q", got, want)
			}
			var conv struct {
				Messages []struct{ Direction, AnsweredBy string }
			}
			d.do("GET", "/v1/conversations/"+turn.ConversationID, nil, "", &conv)
			if len(conv.Messages) == 0 || conv.Messages[0].Direction != "in" || conv.Messages[0].AnsweredBy != want {
				t.Errorf("the conversation's messages %+v: the person's message was not answered by %q", conv.Messages, want)
			}
		})
	}
}

// devBrief points the dev agent at the agent at url and gives the daemon
// a schedule "brief" asking it "slow:Today's tasks", its answer to the
// dev sink.
func devBrief(url string) func(*config.Config) {
	return func(c *config.Config) {
		a := c.Agents[devAgentName]
		a.A2AURL = url
		c.Agents[devAgentName] = a
		c.Schedules = []config.ScheduleConfig{{Name: "brief", Cron: "0 8 * * *", Agent: devAgentName,
			Message: "slow:Today's tasks", To: []envelope.Recipient{{Channel: envelope.ChannelWebhook, Endpoint: devSinkEndpoint}}}}
	}
}

// checkPushes: with pushes on, the agent pushed and served no GetTask
// after its last push (of turns settled ones); with pushes off, it pushed
// nothing and was polled. It returns how many GetTask the agent served.
func checkPushes(t *testing.T, js *a2ajstest.Server, push bool, turns int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := js.Received(ctx)
	if push {
		rec, err = js.WaitSettledPush(ctx, turns)
	}
	if err != nil {
		t.Fatal(err)
	}
	gets, pushes := rec.AfterLastPush("GetTask")
	if push && (pushes == 0 || gets != 0) {
		t.Errorf("pushes on: %d pushes, %d GetTask after the last: %+v", pushes, gets, rec.Events)
	}
	if !push && (pushes != 0 || gets == 0) {
		t.Errorf("pushes off: %d pushes, %d GetTask: %+v", pushes, gets, rec.Events)
	}
	return rec.Calls("GetTask")
}

// pushBrief is what the A2A push tests of the built daemon run against:
// the JS SDK 1.x agent, whose card offers pushes, and a webhook sink. Its
// yaml configures that agent as "brief" and a schedule "brief" (never due;
// run by hand) that asks it "slow:"+message and sends the answer to the
// sink.
type pushBrief struct {
	js      *a2ajstest.Server
	sink    *webhook.Sink
	yaml    string
	message string
}

// startPushBrief starts the agent (working slow on each slow: task) and
// the sink; the test's end stops them.
func startPushBrief(t *testing.T, slow time.Duration, message string) *pushBrief {
	t.Helper()
	js := a2ajstest.Start(t, a2ajstest.Options{Push: true, Slow: slow})
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secrets, _ := webhook.ParseSecrets([]string{secret})
	sink := webhook.NewSink(webhook.SinkConfig{Secrets: secrets, Keep: 100})
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	yaml := fmt.Sprintf(`agents:
  brief:
    a2a_url: "%s"
    timeout: 10s
webhooks:
  endpoints:
    sink: {url: "%s/hook", secret: "%s"}
schedules:
  - name: brief
    cron: "0 0 29 2 *"
    agent: brief
    message: "slow:%s"
    to: [ { channel: webhook, endpoint: sink } ]
    timeout: 1m
`, js.JSONRPC, srv.URL, secret, message)
	return &pushBrief{js: js, sink: sink, yaml: yaml, message: message}
}

// answers counts the agent's answers to the schedule at the sink.
func (p *pushBrief) answers() int {
	n := 0
	for _, rec := range p.sink.Received() {
		if bytes.Contains(rec.Envelope, []byte("Today's brief: "+p.message)) {
			n++
		}
	}
	return n
}

// smsTurn sends "slow:Flights to Lisbon" by SMS from person through the
// dev channel, which starts a conversation turn, and waits for the
// agent's answer to reach person by SMS.
func (d *devDaemon) smsTurn(person string) {
	d.t.Helper()
	res := d.devSay(`{"channel":"sms","from":"` + person + `","text":"slow:Flights to Lisbon"}`)
	if res.Outcome != envelope.DispositionTurn {
		d.t.Fatalf("message: %+v", res)
	}
	poll.Eventually(d.t, 30*time.Second, "the conversation turn's answer by SMS", func() bool {
		for _, m := range d.messages().Messages {
			if m.To == person && strings.Contains(m.Body, "Today's brief: Flights to Lisbon") {
				return true
			}
		}
		return false
	})
}

// answeredTurn waits for the one answered turn in /v1/turns and returns it.
func (d *devDaemon) answeredTurn() (turn struct{ State, AnsweredBy, ConversationID string }) {
	d.t.Helper()
	var turns struct {
		Turns []struct{ State, AnsweredBy, ConversationID string }
	}
	poll.Eventually(d.t, 10*time.Second, "the turn's answered record", func() bool {
		d.do("GET", "/v1/turns?state=answered", nil, "", &turns)
		return len(turns.Turns) == 1
	})
	return turns.Turns[0]
}

// TestA2APushEndToEnd03 is TestA2APushEndToEnd against an A2A 0.3 agent
// built on a2a-go v0.3.3 with its push notifications
// (a2asrv.WithPushNotifications, package a2asrv/push: the whole task after
// each event, to the URL SendMessage names): a scheduled turn and a
// conversation turn are answered by push, and the agent serves no GetTask
// after its last push.
func TestA2APushEndToEnd03(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server")
	}
	ag := agenttest.StartWith(nil, agenttest.Options{Card: true, Push: true})
	defer ag.Close()
	d := startDev(t, devBrief(ag.URL))
	check := func(what string, settled int) {
		t.Helper()
		// The agent records a push once beachd has answered it.
		poll.Eventually(t, 10*time.Second, what+"'s completed task pushed", func() bool {
			n := 0
			for _, e := range ag.Events() {
				if e.Kind == "push" && e.State == "completed" {
					n++
				}
			}
			return n >= settled
		})
		var pushes, gets int
		var errs []string
		for _, e := range ag.Events() {
			switch {
			case e.Kind == "push" && e.Err != "":
				errs = append(errs, e.Err)
			case e.Kind == "push":
				pushes++
				gets = 0
			case e.Kind == "call" && e.Method == "GetTask":
				gets++
			}
		}
		done := 0
		for _, e := range ag.Events() {
			if e.Kind == "push" && e.State == "completed" {
				done++
			}
		}
		if pushes == 0 || gets != 0 || len(errs) != 0 || done != settled {
			t.Errorf("%s: %d pushes (%d completed, want %d), %d GetTask after the last, failed pushes %q: %+v",
				what, pushes, done, settled, gets, errs, ag.Events())
		}
	}
	d.runNow("brief")
	d.waitSink("the scheduled turn's result at the sink", "Today's brief: Today's tasks")
	if got := d.succeededRun(10*time.Second, "the run's record"); got != agent.AnsweredByPush {
		t.Errorf("the run was answered by %q, want push", got)
	}
	check("the scheduled turn", 1)

	d.smsTurn("+447700900779")
	if got := d.answeredTurn().AnsweredBy; got != agent.AnsweredByPush {
		t.Errorf("the conversation turn was answered by %q, want push", got)
	}
	check("the conversation turn", 2)
}

// TestDevAgent03Pushes: `beachd dev --agent-a2a 0.3`'s dev agent (a2a-go)
// offers push notifications in its card and sends them with a2a-go's
// sender, to beachd's push URL: the sample schedule's run is answered by
// push.
func TestDevAgent03Pushes(t *testing.T) {
	d := startDev(t, func(c *config.Config) { c.DevAgentA2A = "0.3" })
	d.runNow(config.DevScheduleName)
	answeredBy := d.succeededRun(30*time.Second, "the succeeded run")
	if st, _ := d.a.agents.Status(devAgentName); st.Generation != agent.V03 {
		t.Fatalf("the dev agent speaks %q, want 0.3", st.Generation)
	}
	d.a.devAgent.mu.Lock()
	pushes := d.a.devAgent.pushes
	d.a.devAgent.mu.Unlock()
	if got := answeredBy; got != agent.AnsweredByPush || pushes == 0 {
		t.Errorf("the 0.3 dev agent's run was answered by %q after %d accepted pushes, want push", got, pushes)
	}
}
