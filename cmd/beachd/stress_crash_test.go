package main

import (
	"context"
	"encoding/json"
	"flag"
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

	"github.com/jackc/pgx/v5"
	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/postgres"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
	"github.com/cool-ai/beachd/store/storetest"
)

var stressLong = flag.Bool("stress.long", false, "run the long crash loop (also BEACHD_STRESS_LONG=1)")

// crashAck is one acknowledged delivery of the crash loop.
type crashAck struct {
	id, channel, to, marker string
}

// deliveryReport asks the daemon about delivery a: its state (the error
// reading it, if any) and a line for a report.
func (d *daemon) deliveryReport(a crashAck) (state, line string) {
	req, _ := http.NewRequest("GET", d.base+"/v1/deliveries/"+a.id, nil)
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	var v struct {
		State, LastError, DeadReason string
		NextAttemptAt                time.Time
		Attempts                     int
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
	}
	if err != nil {
		return err.Error(), fmt.Sprintf("  %s %s: %v\n", a.channel, a.id, err)
	}
	return v.State, fmt.Sprintf("  %s %s: %s after %d attempts, next %s, last error %q %s\n", a.channel, a.id, v.State, v.Attempts,
		v.NextAttemptAt.Format(time.RFC3339), v.LastError, v.DeadReason)
}

// pendingRetries asks the daemon about deliveries; report has a line each.
func (d *daemon) pendingRetries(missing []crashAck) (report string) {
	for _, a := range missing {
		_, line := d.deliveryReport(a)
		report += line
	}
	return report
}

// waiting reports whether a delivery in state s is still to be attempted
// (queued, sending or retrying).
func waiting(s string) bool { return s == "queued" || s == "sending" || s == "retrying" }

// awaitSinks waits until count finds every acknowledged delivery at its
// sink. One whose attempt failed on a loaded machine (an SMTP timeout)
// waits for its retry, minutes away by the email policy: after two
// minutes the daemon d is asked about each one missing, and the wait goes
// on, up to 8 minutes in all, only while each is still waiting. The
// daemon's answer comes after the count: a delivery it says is sent (or
// dead) may have reached its sink in between, so it is counted again; one
// recorded as done and still not at its sink is a failure at once.
func awaitSinks(t *testing.T, d *daemon, all []crashAck, count func(crashAck) int) {
	t.Helper()
	deadline, hardStop := time.Now().Add(120*time.Second), time.Now().Add(8*time.Minute)
	for {
		var missing []crashAck
		for _, a := range all {
			if count(a) == 0 {
				missing = append(missing, a)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var report string
			lost, pending := 0, 0
			for _, a := range missing {
				state, line := d.deliveryReport(a)
				switch {
				case waiting(state):
					pending++
				case count(a) > 0:
					line = strings.TrimSuffix(line, "\n") + " (at its sink when counted again)\n"
				default:
					lost++
				}
				report += line
			}
			if lost > 0 || (pending > 0 && time.Now().After(hardStop)) {
				t.Fatalf("%d of %d acknowledged deliveries never reached their sink (%d recorded as done):\n%s\n%s",
					lost+pending, len(all), lost, report, d.stderr)
			}
			if pending > 0 {
				t.Logf("still waiting for retries:\n%s", report)
			}
			deadline = time.Now().Add(30 * time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deliveryState is the state the daemon reports for delivery id, or the
// error reading it.
func (d *daemon) deliveryState(id string) string {
	req, _ := http.NewRequest("GET", d.base+"/v1/deliveries/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var v struct{ State string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return err.Error()
	}
	return v.State
}

// postMarked posts an envelope whose text and turn id carry marker to the
// recipients (JSON objects, comma-separated) through the daemon at base,
// and returns its deliveries as acknowledged; none when the daemon died
// under the request or refused it.
func postMarked(hc *http.Client, base, marker, recipients string) []crashAck {
	body := fmt.Sprintf(`{"to":[%s],"envelope":{"role":"agent","parts":[{"text":"%s: your table for two at 20:00 is booked.","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"%s","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}}`, recipients, marker, marker)
	req, _ := http.NewRequest("POST", base+"/v1/deliveries", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var a struct {
		Deliveries []struct{ ID, Channel, To string }
	}
	if resp.StatusCode != http.StatusAccepted || json.NewDecoder(resp.Body).Decode(&a) != nil {
		return nil
	}
	out := make([]crashAck, 0, len(a.Deliveries))
	for _, x := range a.Deliveries {
		out = append(out, crashAck{id: x.ID, channel: x.Channel, to: x.To, marker: marker})
	}
	return out
}

// TestCrashLoopMixed runs the built daemon with the webhook, email (to a
// go-smtp sink) and SMS/WhatsApp (to a fake Twilio) channels, posts
// envelopes to all four from several clients, and SIGKILLs the daemon at
// random moments (≥ 20 times; 100 with -stress.long). Then it restarts it
// once more and checks that every acknowledged delivery reached its sink,
// that duplicates are recognisable (webhook-id, Message-ID, To+Body at
// Twilio) and no more than the jobs that could be in flight at the kills,
// that the recorded Twilio SID is one Twilio created, and that the bbolt
// file passes bbolt's consistency check and the outbox invariants. On
// PostgreSQL, every job leased at a kill names a holder with a liveness
// lease (checkHolders).
func TestCrashLoopMixed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	t.Run("bolt", func(t *testing.T) { crashLoopMixed(t, "") })
	// The same loop with the records in PostgreSQL.
	t.Run("postgres", func(t *testing.T) { crashLoopMixed(t, pgtest.DSN(t)) })
}

// crashLoopMixed runs the loop with the records in PostgreSQL at dsn, or in
// the embedded file when dsn is "".
func crashLoopMixed(t *testing.T, dsn string) {
	storeCfg := ""
	if dsn != "" {
		storeCfg = fmt.Sprintf("store: {driver: postgres, dsn: %q}\n", dsn)
	}
	kills := 20
	if *stressLong || os.Getenv("BEACHD_STRESS_LONG") != "" {
		kills = 100
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("BEACHD_CRASH_SEED"); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("BEACHD_CRASH_SEED: %v", err)
		}
	}
	t.Logf("kill timing seed %d (BEACHD_CRASH_SEED sets it)", seed)
	rng := rand.New(rand.NewPCG(seed, 8))

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

	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	addr := freeAddr(t)
	const workers = 8
	cfg := fmt.Sprintf(`listen: %s
data_dir: %s
public_url: http://%s
api_keys: ["%s"]
log: {level: error}
%sdispatch: {workers: %d}
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
  whatsapp_from: "whatsapp:+15550002222"
  rate_per_second: 1000
  burst: 1000
  timeout: 5s
  whatsapp_templates:
    result: {content_sid: HX0123456789abcdef0123456789abcdef, variables: {"1": "{{.Text}}"}}
`, addr, dataDir, addr, e2eKey, storeCfg, workers, hookSrv.URL, secret, mailPort, fakeTwilioAccount, fakeTwilioToken, tw.URL)
	cfgPath := filepath.Join(dir, "beachd.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, bin: bin, cfg: cfgPath, base: "http://" + addr}

	var mu sync.Mutex
	var acked []crashAck
	seq := 0
	hc := &http.Client{Timeout: 10 * time.Second}
	post := func() {
		mu.Lock()
		seq++
		marker := fmt.Sprintf("crash%06d", seq)
		mu.Unlock()
		got := postMarked(hc, d.base, marker, `{"channel":"webhook","endpoint":"sink"},{"channel":"email","address":"alice@example.net"},{"channel":"sms","address":"+447700900123"},{"channel":"whatsapp","address":"+447700900124"}`)
		mu.Lock()
		acked = append(acked, got...)
		mu.Unlock()
	}

	start := time.Now()
	for k := 0; k < kills; k++ {
		d.start()
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
		// A random moment: while posts and deliveries are in flight.
		time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond)
		d.kill()
		cancel()
		wg.Wait()
		if dsn != "" {
			// The killed daemon's jobs in flight are re-queued once its
			// liveness lease runs out: each names a holder that has one.
			checkHolders(t, dsn, fmt.Sprintf("after kill %d", k+1))
		}
	}
	d.start()
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
		case "whatsapp":
			return len(tw.Matching("whatsapp:"+a.to, a.marker))
		}
		t.Fatalf("unexpected channel %q", a.channel)
		return 0
	}
	awaitSinks(t, d, all, count)
	// A delivery sent just before a kill but not yet recorded is sent again
	// by the restarted daemon; its first copy is already at the sink, so
	// the daemon is stopped only once it has recorded every outcome.
	unsettled := all
	settle := time.Now().Add(60 * time.Second)
	for {
		var still []crashAck
		for _, a := range unsettled {
			if waiting(d.deliveryState(a.id)) {
				still = append(still, a)
			}
		}
		if unsettled = still; len(unsettled) == 0 {
			break
		}
		if time.Now().After(settle) {
			report := d.pendingRetries(unsettled)
			t.Fatalf("%d of %d deliveries at their sinks were never recorded as done:\n%s\n%s", len(unsettled), len(all), report, d.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.stop()

	byChannel, dupsByChannel := map[string]int{}, map[string]int{}
	dups, delivered := 0, 0
	for _, a := range all {
		n := count(a)
		if n == 0 {
			continue
		}
		delivered++
		byChannel[a.channel]++
		dups += n - 1
		dupsByChannel[a.channel] += n - 1
	}
	lost := len(all) - delivered
	if st := hooks.Stats(); st.Unverified != 0 {
		t.Errorf("%d webhooks failed signature verification", st.Unverified)
	}
	// A kill interrupts at most `workers` sends (plus a Twilio POST whose
	// answer was lost counts once more).
	bound := kills * workers
	if dups > bound {
		t.Errorf("%d duplicates for %d kills of %d workers (bound %d)", dups, kills, workers, bound)
	}

	// The store: bbolt's check of the file, then the outbox invariants and
	// the Twilio SIDs we recorded. The daemon is gone: the test opens its
	// store to read the outcome.
	var db store.Deliveries
	boltCheck := "ok"
	if dsn != "" {
		checkPostgres(t, dsn)
		boltCheck = "not bbolt"
		pg, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer pg.Close()
		db = pg
	} else {
		dbPath := filepath.Join(dataDir, "beachd.db")
		bdb, err := bbolt.Open(dbPath, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := bdb.View(func(tx *bbolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		}); err != nil {
			boltCheck = err.Error()
			t.Errorf("bbolt check: %v", err)
		}
		bdb.Close()
		// storetest checks the outbox invariants when the test ends.
		db = storetest.OpenAt(t, dbPath, bolt.Options{})
	}
	for _, a := range all {
		del, err := db.Delivery(context.Background(), a.id)
		if err != nil {
			t.Fatalf("delivery %s: %v", a.id, err)
		}
		if del.State != store.StateSent {
			t.Errorf("%s %s reached its sink but is %s", a.channel, a.id, del.State)
		}
		if a.channel == "sms" || a.channel == "whatsapp" {
			to := a.to
			if a.channel == "whatsapp" {
				to = "whatsapp:" + to
			}
			ok := false
			for _, sid := range tw.Matching(to, a.marker) {
				ok = ok || sid == del.ProviderID
			}
			if !ok {
				t.Errorf("%s %s: recorded SID %q is not one Twilio created for it", a.channel, a.id, del.ProviderID)
			}
		}
	}

	summary := map[string]any{"kills": kills, "acknowledged": len(all), "delivered": delivered, "lost": lost,
		"duplicates": dups, "duplicateBound": bound, "deliveredByChannel": byChannel, "duplicatesByChannel": dupsByChannel, "boltCheck": boltCheck,
		"seconds": time.Since(start).Seconds()}
	t.Logf("acknowledged %d, delivered %d, lost %d, duplicates %d (bound %d; by channel %v), kills %d; delivered by channel %v; bbolt check %s; %s",
		len(all), delivered, lost, dups, bound, dupsByChannel, kills, byChannel, boltCheck, time.Since(start).Round(time.Second))
	if p := os.Getenv("BEACHD_CRASH_JSON"); p != "" {
		b, _ := json.Marshal(summary)
		os.WriteFile(p, b, 0o644)
	}
}

// checkHolders fails the test for every delivery in the PostgreSQL store
// at dsn that is leased under a holder without a liveness lease: another
// replica could not tell when that holder died, and the job would wait
// for its own lease (minutes) instead of the holder's liveness lease.
func checkHolders(t *testing.T, dsn string, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT d.id, d.channel, coalesce(d.lease_holder, '') FROM deliveries d WHERE d.lease_until_ns IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM singleton_leases l WHERE l.name = $1 || d.lease_holder) ORDER BY d.id`, store.LivenessLease(""))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	orphans := 0
	for rows.Next() {
		var id, channel, holder string
		if err := rows.Scan(&id, &channel, &holder); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s: %s %s is leased by %q, which has no liveness lease", when, channel, id, holder)
		orphans++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if orphans > 0 {
		t.FailNow() // rather than wait minutes for those leases
	}
}
