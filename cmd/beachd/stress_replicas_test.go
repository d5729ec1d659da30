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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// replicaLeaseTTL is the singletons' lease in the replica tests: short, so
// that a takeover after a SIGKILL comes within the test's patience.
const replicaLeaseTTL = 3 * time.Second

// TestCrashLoopReplicas runs three built daemons on one PostgreSQL under a
// mixed load (envelopes to a webhook, email and SMS posted to any replica,
// approvals decided on any replica, a schedule firing every second) and
// SIGKILLs a random replica at random moments (≥ 20 times), restarting it
// each time. In the end: every acknowledged delivery reached its sink,
// duplicates are no more than the jobs that could be in flight at the
// kills, no schedule slot started two turns, every approval was decided
// once and injected once, and the store's invariants hold.
func TestCrashLoopReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three daemons")
	}
	kills := 20
	if *stressLong || os.Getenv("BEACHD_STRESS_LONG") != "" {
		kills = 60
	}
	dsn := pgtest.DSN(t)
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill timing seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	var rngMu sync.Mutex
	pick := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(n) }

	// Peers.
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secrets, _ := webhook.ParseSecrets([]string{secret})
	hooks := webhook.NewSink(webhook.SinkConfig{Secrets: secrets, Keep: 200000})
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond) // keeps deliveries in flight when a kill comes
		hooks.ServeHTTP(w, r)
	}))
	defer hookSrv.Close()
	mail := &smtptest.Server{}
	mailPort, _ := smtptest.Start(t, mail, smtptest.Plain)
	tw := twiliotest.Start(t, fakeTwilioAccount, fakeTwilioToken)
	ag := agenttest.Start()
	defer ag.Close()

	// Approvals: each suspends its own turn on the agent.
	client, err := agent.New(map[string]agent.Target{"travel": {URL: ag.URL, Timeout: 10 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const approvals = 24
	envs := make([][]byte, approvals)
	for i := range envs {
		turn, err := client.StartTurn(context.Background(), "travel", fmt.Sprintf("approve:rep_%d", i), "")
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
	turnsBefore := len(ag.Contexts())

	const workers = 8
	reps := make([]*daemon, 3)
	for i := range reps {
		dir := t.TempDir()
		addr := freeAddr(t)
		cfg := fmt.Sprintf(`listen: %s
data_dir: %s
public_url: http://%s
api_keys: ["%s"]
log: {level: error}
store: {driver: postgres, dsn: "%s", lease_ttl: %s}
dispatch: {workers: %d}
agents:
  travel: {a2a_url: "%s"}
schedules:
  - name: tick
    cron: "* * * * * *"
    agent: travel
    message: "brief: tick"
    to: [{channel: webhook, endpoint: sink}]
webhooks:
  endpoints:
    sink: {url: "%s/hook", secret: "%s"}
email:
  from: "Agent <agent@example.org>"
  smtp: {host: 127.0.0.1, port: %d, tls: none, pool_size: 4, timeout: 5s}
twilio:
  account_sid: "%s"
  auth_token: "%s"
  api_base_url: "%s"
  sms_from: "+15550001111"
  rate_per_second: 1000
  burst: 1000
  timeout: 5s
`, addr, filepath.Join(dir, "data"), addr, e2eKey, dsn, replicaLeaseTTL, workers, ag.URL, hookSrv.URL, secret, mailPort,
			fakeTwilioAccount, fakeTwilioToken, tw.URL)
		cfgPath := filepath.Join(dir, "beachd.yaml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		reps[i] = &daemon{t: t, bin: bin, cfg: cfgPath, base: "http://" + addr}
		reps[i].start()
	}
	var upMu sync.Mutex
	up := []bool{true, true, true}
	anyUp := func() *daemon {
		upMu.Lock()
		defer upMu.Unlock()
		for {
			if i := pick(len(reps)); up[i] {
				return reps[i]
			}
		}
	}

	var mu sync.Mutex
	var acked []crashAck
	seq := 0
	hc := &http.Client{Timeout: 10 * time.Second}
	call := func(d *daemon, method, path, body string) (*http.Response, error) {
		req, _ := http.NewRequest(method, d.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eKey)
		req.Header.Set("Content-Type", "application/json")
		return hc.Do(req)
	}
	post := func() {
		mu.Lock()
		seq++
		marker := fmt.Sprintf("rep%06d", seq)
		mu.Unlock()
		got := postMarked(hc, anyUp().base, marker, `{"channel":"webhook","endpoint":"sink"},{"channel":"email","address":"alice@example.net"},{"channel":"sms","address":"+447700900123"}`)
		mu.Lock()
		acked = append(acked, got...)
		mu.Unlock()
	}
	// Approvals are posted, then decided, each on whichever replica answers.
	posted, decided := map[int]bool{}, map[int]bool{}
	approve := func() {
		for i := 0; i < approvals; i++ {
			switch {
			case !posted[i]:
				resp, err := call(anyUp(), "POST", "/v1/deliveries", fmt.Sprintf(`{"to":[{"channel":"webhook","endpoint":"sink"}],"agent":"travel","envelope":%s}`, envs[i]))
				if err == nil {
					resp.Body.Close()
					posted[i] = resp.StatusCode == http.StatusAccepted
				}
				return
			case !decided[i]:
				resp, err := call(anyUp(), "POST", fmt.Sprintf("/v1/approvals/rep_%d/decision", i), `{"decision":"granted","reason":"ok"}`)
				if err == nil {
					resp.Body.Close()
					// 409: an earlier try was decided though its answer was lost.
					decided[i] = resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusConflict
				}
				return
			}
		}
	}

	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				post()
			}
		}()
	}
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(200+pick(600)) * time.Millisecond)
		approve()
		i := pick(len(reps))
		upMu.Lock()
		up[i] = false
		upMu.Unlock()
		reps[i].kill()
		time.Sleep(time.Duration(100+pick(400)) * time.Millisecond)
		reps[i].start()
		upMu.Lock()
		up[i] = true
		upMu.Unlock()
	}
	for len(decided) < approvals {
		approve()
	}
	cancel()
	wg.Wait()
	defer func() {
		for _, d := range reps {
			d.stop()
		}
	}()

	mu.Lock()
	all := append([]crashAck(nil), acked...)
	mu.Unlock()
	count := func(a crashAck) int {
		switch a.channel {
		case "webhook":
			return hooks.Count(a.id)
		case "email":
			return mail.Count(a.id + "@example.org")
		case "sms":
			return len(tw.Matching(a.to, a.marker))
		}
		t.Fatalf("unexpected channel %q", a.channel)
		return 0
	}
	awaitSinks(t, reps[0], all, count)
	dups, delivered := 0, 0
	for _, a := range all {
		if n := count(a); n > 0 {
			delivered++
			dups += n - 1
		}
	}
	if st := hooks.Stats(); st.Unverified != 0 {
		t.Errorf("%d webhooks failed signature verification", st.Unverified)
	}
	if bound := kills * workers; dups > bound {
		t.Errorf("%d duplicates for %d kills of %d workers (bound %d)", dups, kills, workers, bound)
	}

	// Approvals: each decided once, and its decision reached the agent once.
	injectDeadline := time.Now().Add(60 * time.Second)
	for {
		got := map[string]int{}
		for _, r := range ag.Received() {
			got[r.Response.ApprovalID]++
		}
		missing := 0
		for i := 0; i < approvals; i++ {
			switch c := got[fmt.Sprintf("rep_%d", i)]; {
			case c == 0:
				missing++
			case c > 1:
				t.Fatalf("approval rep_%d injected %d times", i, c)
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(injectDeadline) {
			t.Fatalf("%d of %d decided approvals never reached the agent", missing, approvals)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < approvals; i++ {
		resp, err := call(reps[i%3], "GET", fmt.Sprintf("/v1/approvals/rep_%d", i), "")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		var a struct{ State string }
		json.Unmarshal(buf.Bytes(), &a)
		if a.State != "granted" || strings.Count(buf.String(), `"event": "decided"`) > 1 {
			t.Fatalf("approval rep_%d: %s", i, buf.String())
		}
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/approvals/rep_%d/events", reps[(i+1)%3].base, i), nil)
		req.Header.Set("Authorization", "Bearer "+e2eKey)
		checkTrailAnswer(t, fmt.Sprint("rep_", i), req)
	}

	// The schedule: no slot started more than one turn for one attempt.
	slots := map[string]int{}
	for _, c := range ag.Contexts()[turnsBefore:] {
		rest, ok := strings.CutPrefix(c, "beachd-tick-")
		if !ok {
			continue
		}
		slots[rest]++
		if slots[rest] > 1 {
			t.Errorf("schedule slot/attempt %s started %d turns", rest, slots[rest])
		}
	}
	firstAttempts := 0
	for k := range slots {
		if strings.HasSuffix(k, "-1") || strings.HasSuffix(k, "-0") {
			firstAttempts++
		}
	}
	elapsed := time.Since(start)
	// The scheduler's holder changes at kills; a takeover waits out the
	// lease. Most seconds still fire.
	if min := int(elapsed.Seconds()) / 3; firstAttempts < min {
		t.Errorf("the schedule fired %d slots in %s, want at least %d: singleton takeover is not working", firstAttempts, elapsed.Round(time.Second), min)
	}

	// The store: invariants, and each singleton's lease held by one replica.
	checkPostgres(t, dsn)
	db, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leases, err := db.ListLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range leases {
		if !strings.HasPrefix(l.Name, store.LivenessLease("")) {
			names = append(names, l.Name+"@"+strconv.FormatUint(l.Generation, 10))
		}
	}
	t.Logf("replicas 3, kills %d: acknowledged %d, delivered %d, lost %d, duplicates %d (bound %d); approvals %d injected once each; schedule slots fired %d in %s; leases %v",
		kills, len(all), delivered, len(all)-delivered, dups, kills*workers, approvals, firstAttempts, elapsed.Round(time.Second), names)
}

// checkPostgres opens the PostgreSQL store at dsn that the daemons used
// and checks its invariants.
func checkPostgres(t *testing.T, dsn string) {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CheckInvariants(); err != nil {
		t.Errorf("store invariants: %v", err)
	}
}
