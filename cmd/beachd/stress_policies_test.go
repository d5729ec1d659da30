package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/channels/slack/slacktest"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// TestCrashLoopPolicies: approvals under a policy with a quorum of two and
// a ladder (a reminder after 1s, the second step asked after 2s), decided
// by votes on two channels — the first step's people click Slack buttons,
// the escalation's person answers SMS codes through the signed Twilio
// webhook — while beachd is SIGKILLed at random moments (on PostgreSQL,
// one of two replicas at a time). In the end every approval
// was injected exactly once, no person was asked or reminded twice (the
// timers fired once), and every event chain verifies.
func TestCrashLoopPolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	t.Run("bolt", func(t *testing.T) { crashLoopPolicies(t, "", 1) })
	t.Run("postgres", func(t *testing.T) { crashLoopPolicies(t, pgtest.DSN(t), 2) })
}

func crashLoopPolicies(t *testing.T, dsn string, replicas int) {
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	ag := agenttest.Start()
	defer ag.Close()
	client, err := agent.New(map[string]agent.Target{"travel": {URL: ag.URL, Timeout: 10 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	slackAPI := slacktest.StartFake(t)
	tw := twiliotest.Start(t, fakeTwilioAccount, fakeTwilioToken)
	const n = 16
	ids := make([]string, n)
	envs := make([][]byte, n)
	for i := range envs {
		ids[i] = fmt.Sprintf("pcrash_%d", i)
		turn, err := client.StartTurn(context.Background(), "travel", "approve:"+ids[i], "")
		if err != nil {
			t.Fatal(err)
		}
		env, err := client.WaitTurn(context.Background(), "travel", turn, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if envs[i], err = json.Marshal(env); err != nil {
			t.Fatal(err)
		}
	}
	storeCfg := ""
	if dsn != "" {
		storeCfg = fmt.Sprintf("store: {driver: postgres, dsn: %q, lease_ttl: 3s}\n", dsn)
	}
	const alice, bob, carol = "U0ALICE", "U0BOB", "+15555550171"
	reps := make([]*daemon, replicas)
	for r := range reps {
		dir := t.TempDir()
		addr := freeAddr(t)
		cfg := fmt.Sprintf(`listen: %s
data_dir: %s
public_url: http://%s
api_keys: ["%s"]
log: {level: warn}
%sagents:
  travel: {a2a_url: "%s"}
slack: {bot_token: "xoxb-1234567890-abcdefghij", signing_secret: "%s", api_base_url: "%s"}
twilio: {account_sid: "%s", auth_token: "%s", api_base_url: "%s", sms_from: "+15550001111", rate_per_second: 1000, burst: 1000, timeout: 5s}
approvals:
  policies:
    - name: ladder
      match: { agent: travel }
      quorum: 2
      steps:
        - to: [ {channel: slack, address: %s}, {channel: slack, address: %s} ]
          remind_after: 1s
          escalate_after: 2s
        - to: [ {channel: sms, address: "%s"} ]
`, addr, filepath.Join(dir, "data"), addr, e2eKey, storeCfg, ag.URL, e2eSlackSecret, slackAPI.URL,
			fakeTwilioAccount, fakeTwilioToken, tw.URL, alice, bob, carol)
		cfgPath := filepath.Join(dir, "beachd.yaml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		reps[r] = &daemon{t: t, bin: bin, cfg: cfgPath, base: "http://" + addr}
	}
	post := func(d *daemon, i int) {
		code, out, err := d.post(fmt.Sprintf(`{"to":[{"channel":"slack","address":"U0CUSTOMER"}],"agent":"travel","envelope":%s}`, envs[i]))
		if err != nil || code != 202 {
			t.Fatalf("post %d: %d %s %v\n%s", i, code, out, err, d.stderr)
		}
	}
	// button is the Approve value of approval id in a message to user
	// (the fake Slack posts a user's messages in their DM, D…).
	button := func(id, user string) (value, channel, ts string) {
		posts, _, _ := slackAPI.Snapshot()
		for _, p := range posts {
			if p.Channel != "D"+strings.TrimPrefix(user, "U") { // the user's DM
				continue
			}
			if v, _ := slackButtons(t, p.Blocks, id); v != "" {
				return v, p.Channel, p.TS
			}
		}
		return "", "", ""
	}
	rng := rand.New(rand.NewPCG(3, 4))
	hc := &http.Client{Timeout: 10 * time.Second}
	// pending lists the approvals still pending, as d answers.
	pending := func(d *daemon) map[string]bool {
		var v struct{ Approvals []struct{ ID string } }
		if code, err := getJSON(d.base, "/v1/approvals?state=pending&limit=100", &v); err != nil || code != 200 {
			t.Fatalf("pending approvals: %d %v\n%s", code, err, d.stderr)
		}
		out := map[string]bool{}
		for _, a := range v.Approvals {
			out[a.ID] = true
		}
		return out
	}
	// carolCodes are the codes of the escalations' SMS to carol not
	// answered yet; each answers the approval it was issued for.
	usedCodes := map[string]bool{}
	carolCode := func() string {
		for _, m := range tw.Created() {
			if mm := anyCodeRe.FindStringSubmatch(m.Body); mm != nil && m.To == carol && !usedCodes[mm[1]] {
				return mm[1]
			}
		}
		return ""
	}
	posted, aliceVoted := 0, map[int]bool{}
	kills, clicks, texts := 0, 0, 0
	left := map[string]bool{}
	for round := 0; posted < n || len(left) > 0 || kills < 10; round++ {
		if round > 80 {
			t.Fatalf("not done after %d rounds: %d posted, pending %v", round, posted, left)
		}
		for _, d := range reps { // the replica killed last round comes back
			if d.cmd == nil || d.cmd.ProcessState != nil {
				d.start()
			}
		}
		victim := reps[rng.IntN(replicas)]
		live := victim // its work in flight is what the kill interrupts
		for s, steps := 0, 3+rng.IntN(8); s < steps; s++ {
			time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
			if posted < n && rng.IntN(3) == 0 {
				post(live, posted)
				posted++
				continue
			}
			left = pending(live)
			for i := 0; i < posted; i++ {
				if !left[ids[i]] {
					continue
				}
				voter := alice
				if aliceVoted[i] {
					voter = bob
				}
				if aliceVoted[i] && i%2 == 0 {
					// Half wait for the escalation's person, by SMS.
					code := carolCode()
					if code == "" {
						continue
					}
					if status, out := postTwilio(hc, live.base, live.base, fakeTwilioToken,
						smsForm(fmt.Sprintf("SMpolicycrash%020d", texts), carol, "+15550001111", "YES "+code)); status/100 != 2 {
						t.Fatalf("carol's SMS: %d %s\n%s", status, out, live.stderr)
					}
					usedCodes[code] = true
					texts++
					break
				}
				v, ch, ts := button(ids[i], voter)
				if v == "" {
					continue
				}
				if code := clickSlack(t, live.base, e2eSlackSecret, time.Now(), voter, ch, ts, "beachd_approve", v, fmt.Sprintf("%d.%d", round, s)); code != 200 {
					t.Fatalf("click %s by %s: %d\n%s", ids[i], voter, code, live.stderr)
				}
				aliceVoted[i] = true
				clicks++
				break
			}
		}
		victim.kill()
		kills++
	}
	for _, d := range reps {
		if d.cmd.ProcessState != nil {
			d.start()
		}
		defer d.stop()
	}
	d := reps[0]
	poll := func(what string, ok func() bool) {
		for end := time.Now().Add(60 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s\n%s", what, d.stderr)
			}
		}
	}
	injected := func() map[string]int {
		got := map[string]int{}
		for _, r := range ag.Received() {
			got[r.Response.ApprovalID]++
		}
		return got
	}
	poll("not every approval reached the agent", func() bool {
		got := injected()
		for _, id := range ids {
			if got[id] == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond) // a second injection would come now
	got := injected()
	reminders := 0
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("%s injected %d times", id, got[id])
		}
		req, _ := http.NewRequest("GET", d.base+"/v1/approvals/"+id+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+e2eKey)
		checkTrailAnswer(t, id, req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var tr struct{ Events []store.ApprovalEvent }
		json.NewDecoder(resp.Body).Decode(&tr)
		resp.Body.Close()
		seen := map[string]int{}
		for _, e := range tr.Events {
			switch e.Kind {
			case store.EventAsked, store.EventReminded, store.EventEscalated:
				seen[e.Kind+" "+e.Actor]++
				if e.Kind == store.EventReminded {
					reminders++
				}
			}
		}
		for k, c := range seen {
			if c > 1 {
				t.Errorf("%s: %q %d times: a timer fired twice", id, k, c)
			}
		}
	}
	// Slack messages are delivered at least once: a kill between Slack's
	// answer and its record sends one again. More copies than kills
	// would be a fault of the timers, not of that window.
	posts, _, _ := slackAPI.Snapshot()
	copies := map[string]int{}
	for _, p := range posts {
		for _, id := range ids {
			if strings.Contains(p.Blocks, "approval:"+id+`"`) {
				copies[p.Channel+" "+id+" "+fmt.Sprint(strings.Contains(p.Text+p.Blocks, "Reminder:"))]++
			}
		}
	}
	extra := 0
	for _, c := range copies {
		extra += c - 1
	}
	if extra > kills {
		t.Errorf("%d repeated Slack messages, more than the %d kills explain", extra, kills)
	}
	t.Logf("approvals %d, Slack clicks %d, SMS votes of the escalation's person %d, reminders %d, kills %d, Slack messages repeated by a kill %d",
		n, clicks, texts, reminders, kills, extra)
	if dsn != "" {
		for _, d := range reps {
			d.stop()
		}
		checkPostgres(t, dsn)
	}
}
