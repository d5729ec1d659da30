package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/channels/slack"
	"github.com/cool-ai/beachd/channels/slack/slacktest"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// TestCrashLoopApprovals: a real agent suspends turns on approval
// requests; the built daemon delivers them, operators decide them, and the
// daemon is SIGKILLed at random moments throughout — between decisions,
// with injections in flight. In the end every approval is decided once and
// its decision reached the agent exactly once, and the bbolt file passes
// its consistency check. It runs against an A2A 0.3 agent (a2a-go, no
// card: beachd probes) and an A2A 1.0 agent (the JS SDK, chosen by card),
// both with a2a_version auto.
func TestCrashLoopApprovals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	for _, gen := range []string{agent.V03, agent.V10} {
		t.Run("a2a-"+gen, func(t *testing.T) { crashLoopApprovals(t, gen, "") })
	}
	// The same loop with the records in PostgreSQL.
	t.Run("postgres", func(t *testing.T) {
		crashLoopApprovals(t, agent.V03, pgtest.DSN(t))
	})
}

// crashLoopApprovals runs the loop against an agent of generation gen, with
// the records in PostgreSQL at dsn, or in the embedded file when dsn is "".
func crashLoopApprovals(t *testing.T, gen, dsn string) {
	storeCfg := ""
	if dsn != "" {
		storeCfg = fmt.Sprintf("store: {driver: postgres, dsn: %q}\n", dsn)
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	var agentURL string
	var injected func() map[string]int // approval id → times received
	if gen == agent.V03 {
		ag := agenttest.Start()
		defer ag.Close()
		agentURL = ag.URL
		injected = func() map[string]int {
			got := map[string]int{}
			for _, r := range ag.Received() {
				got[r.Response.ApprovalID]++
			}
			return got
		}
	} else {
		js := a2ajstest.Start(t, a2ajstest.Options{})
		agentURL = js.JSONRPC
		injected = func() map[string]int {
			got := map[string]int{}
			if r, err := js.Received(context.Background()); err == nil {
				for _, a := range r.Approvals {
					id, _ := a.Response["approvalId"].(string)
					got[id]++
				}
			}
			return got
		}
	}
	client, err := agent.New(map[string]agent.Target{"travel": {URL: agentURL, Timeout: 10 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Half the approvals also go to a Slack user, and some are decided by
	// the Slack button (a signed click) rather than by an operator.
	slackAPI := slacktest.StartFake(t)
	sink := webhook.NewSink(webhook.SinkConfig{Keep: 10000})
	srv := httptest.NewServer(sink)
	defer srv.Close()

	// Each approval suspends its own turn on the agent.
	const n = 40
	ctx := context.Background()
	envs := make([][]byte, n)
	for i := range envs {
		turn, err := client.StartTurn(ctx, "travel", fmt.Sprintf("approve:crash_%d", i), "")
		if err != nil {
			t.Fatal(err)
		}
		env, err := client.WaitTurn(ctx, "travel", turn, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if envs[i], err = json.Marshal(env); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`listen: %s
data_dir: %s
api_keys: ["%s"]
log: {level: warn}
%sagents:
  travel: {a2a_url: "%s"}
webhooks:
  endpoints:
    sink: {url: "%s/hook", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
slack: {bot_token: "xoxb-1234567890-abcdefghij", signing_secret: "%s", api_base_url: "%s"}
`, addr, filepath.Join(dir, "data"), e2eKey, storeCfg, agentURL, srv.URL, e2eSlackSecret, slackAPI.URL)
	cfgPath := filepath.Join(dir, "beachd.yaml")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	d := &daemon{t: t, bin: bin, cfg: cfgPath, base: "http://" + addr}
	call := func(method, path, body string) (int, error) {
		req, _ := http.NewRequest(method, d.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// slackButton is the Approve value of approval i's Slack message, and
	// where the message is, once Slack has it.
	slackButton := func(i int) (value, channel, ts string) {
		posts, _, _ := slackAPI.Snapshot()
		for _, p := range posts {
			if v, _ := slackButtons(t, p.Blocks, fmt.Sprintf("crash_%d", i)); v != "" {
				return v, p.Channel, p.TS
			}
		}
		return "", "", ""
	}
	rng := rand.New(rand.NewPCG(1, 2))
	posted, decided, slackAsked := 0, map[int]bool{}, 0
	kills, byClick := 0, 0
	for round := 0; posted < n || len(decided) < n; round++ {
		d.start()
		// Post the next envelopes, decide some of those already posted, and
		// kill after a random number of steps.
		steps := 5 + rng.IntN(15)
		for s := 0; s < steps; s++ {
			if posted < n && (rng.IntN(2) == 0 || len(decided) == posted) {
				to := `{"channel":"webhook","endpoint":"sink"}`
				if posted%2 == 0 {
					to += `,{"channel":"slack","address":"U0CRASH"}`
					slackAsked++
				}
				code, err := call("POST", "/v1/deliveries", fmt.Sprintf(`{"to":[%s],"agent":"travel","envelope":%s}`, to, envs[posted]))
				if err != nil || code != 202 {
					t.Fatalf("post %d: %d %v\n%s", posted, code, err, d.stderr)
				}
				posted++
				continue
			}
			for i := 0; i < posted; i++ {
				if decided[i] {
					continue
				}
				if v, ch, ts := slackButton(i); v != "" && rng.IntN(3) > 0 {
					if code := clickSlack(t, d.base, e2eSlackSecret, time.Now(), "U0CRASH", ch, ts, "beachd_approve", v, fmt.Sprintf("%d.%d", round, s)); code != 200 {
						t.Fatalf("click %d: %d\n%s", i, code, d.stderr)
					}
					decided[i] = true
					byClick++
					break
				}
				code, err := call("POST", fmt.Sprintf("/v1/approvals/crash_%d/decision", i), `{"decision":"granted","reason":"ok"}`)
				if err != nil || code != 200 {
					t.Fatalf("decide %d: %d %v\n%s", i, code, err, d.stderr)
				}
				decided[i] = true
				break
			}
		}
		d.kill()
		kills++
	}
	d.start()
	defer d.stop()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := injected()
		missing, dups := 0, 0
		for i := 0; i < n; i++ {
			switch c := got[fmt.Sprintf("crash_%d", i)]; {
			case c == 0:
				missing++
			case c > 1:
				dups += c - 1
			}
		}
		if dups > 0 {
			t.Fatalf("%d approvals injected more than once", dups)
		}
		if missing == 0 {
			t.Logf("approvals %d, decided %d (%d by a Slack click), injected once each, kills %d", n, len(decided), byClick, kills)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d decided approvals never reached the agent\n%s", missing, n, d.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every Slack message of a decided approval that beachd recorded is
	// rewritten, in the end: when its decision committed just before a
	// kill, the decision's follow-up timer makes the next process rewrite
	// it (some ten seconds after the decision); when its ts was recorded
	// after the decision (its post was on its way), its record wrote a
	// follow-up of its own. A message posted again after a kill (Slack
	// took the first post, the kill came before its record) leaves the
	// first copy unknown to beachd and so unrewritten (its buttons answer
	// that the request is decided): no more of those than kills.
	recorded := func() map[string]bool {
		var out struct {
			Deliveries []struct {
				ProviderID  string            `json:"providerId"`
				ApprovalIDs []string          `json:"approvalIds"`
				Extra       map[string]string `json:"extra"`
			}
		}
		req, _ := http.NewRequest("GET", d.base+"/v1/deliveries?channel=slack&limit=1000", nil)
		req.Header.Set("Authorization", "Bearer "+e2eKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, dl := range out.Deliveries {
			if dl.ProviderID != "" && len(dl.ApprovalIDs) > 0 && dl.Extra[slack.ExtraUpdate] == "" {
				got[dl.ProviderID] = true
			}
		}
		return got
	}
	unrewritten := func() (left, copies, known int) {
		posts, ups, _ := slackAPI.Snapshot()
		done := map[string]bool{}
		for _, u := range ups {
			done[u.Channel+"/"+u.TS] = true
		}
		rec := recorded()
		for _, p := range posts {
			if !strings.Contains(p.Blocks, "approval:crash_") {
				continue
			}
			switch where := p.Channel + "/" + p.TS; {
			case !rec[where]:
				copies++
			case !done[where]:
				left++
				known++
			default:
				known++
			}
		}
		return left, copies, known
	}
	left, copies, known := unrewritten()
	// A post whose record a kill cut off is posted again once its lease
	// ends: wait for every Slack delivery's record too.
	for end := time.Now().Add(45 * time.Second); (left > 0 || known < slackAsked) && time.Now().Before(end); left, copies, known = unrewritten() {
		time.Sleep(100 * time.Millisecond)
	}
	if left > 0 || copies > kills || known != slackAsked {
		d.stop()
		t.Fatalf("%d of %d Slack messages beachd recorded not rewritten (%d asked); %d copies unknown to beachd, %d kills\n%s",
			left, known, slackAsked, copies, kills, d.stderr)
	}
	t.Logf("Slack: %d messages recorded, all rewritten; %d copies posted again across %d kills (unknown to beachd, not rewritten)", known, copies, kills)
	// Every approval reads granted, decided once.
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/approvals/crash_%d", d.base, i), nil)
		req.Header.Set("Authorization", "Bearer "+e2eKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		var a struct {
			State string
		}
		json.Unmarshal(buf.Bytes(), &a)
		if a.State != "granted" || strings.Count(buf.String(), `"event": "decided"`) > 1 {
			t.Fatalf("approval crash_%d: %s", i, buf.String())
		}
		req, _ = http.NewRequest("GET", fmt.Sprintf("%s/v1/approvals/crash_%d/events", d.base, i), nil)
		req.Header.Set("Authorization", "Bearer "+e2eKey)
		checkTrailAnswer(t, fmt.Sprint("crash_", i), req)
	}
	d.stop()
	if dsn != "" {
		checkPostgres(t, dsn)
		return
	}
	db, err := bolt.Open(filepath.Join(dir, "data", "beachd.db"), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("bbolt check: %v", err)
	}
}

// checkTrailAnswer asks for an approval's events with req and checks,
// here, that the chain verifies and holds exactly one decision: the crashes
// neither broke the chain nor recorded the decision twice.
func checkTrailAnswer(t *testing.T, id string, req *http.Request) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr api.EventsView
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != 200 {
		t.Fatalf("events of %s: %d %v", id, resp.StatusCode, err)
	}
	if err := approvals.VerifyHead(tr.Events, tr.Head); err != nil || !tr.Verified {
		t.Fatalf("trail of %s does not verify (server: %v): %v", id, tr.Verified, err)
	}
	decided, injected := 0, 0
	for _, e := range tr.Events {
		switch e.Kind {
		case "decided":
			decided++
		case "injected":
			injected++
		}
	}
	if decided != 1 || injected > 1 {
		t.Fatalf("trail of %s: %d decided and %d injected events, want 1 and at most 1", id, decided, injected)
	}
}
