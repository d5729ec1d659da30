package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// TestA2APushAcrossAKill: the built daemon starts a scheduled turn (run
// now) at the JS SDK 1.x agent, whose card offers push notifications; the
// daemon is SIGKILLed while the agent works, the agent pushes its final
// update while the daemon is down (the SDK does not retry it), and the
// daemon restarts on the same store. The run is resumed — it waits for the
// task it had recorded, by polling, since the push it missed is not sent
// again — and its answer reaches the webhook sink exactly once; the agent
// served one SendMessage (no second turn).
func TestA2APushAcrossAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	p := startPushBrief(t, 3*time.Second, "Crash brief")
	js := p.js

	addr := freeAddr(t)
	d := newDaemon(t, bin, addr, addr, "log: {level: info}\n"+p.yaml)
	d.start()
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.stderr)
		}
	}()

	if code := d.runNow("brief"); code != 202 {
		t.Fatalf("run now: %d", code)
	}
	last := d.lastRun
	// The turn is in flight at the agent, its task recorded: kill.
	poll.Eventually(t, 20*time.Second, "the run's task to be recorded", func() bool {
		r := last()
		return r != nil && r.State == "running" && r.TaskID != ""
	})
	killed := time.Now()
	d.kill()
	// The agent finishes and pushes its final update to nobody.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pushed, err := js.WaitSettledPush(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed.Finals) != 1 || pushed.Finals[0].At < killed.UnixMilli() {
		t.Fatalf("the agent finished its task before the kill (%+v, kill at %d): no push went to a dead daemon", pushed.Finals, killed.UnixMilli())
	}

	d.start()
	poll.Eventually(t, 30*time.Second, "the resumed run to succeed", func() bool {
		r := last()
		return r != nil && r.State == "succeeded"
	})
	r := last()
	if r.AnsweredBy != "poll" {
		t.Errorf("the resumed run was answered by %q, want poll (its push went to the killed daemon)", r.AnsweredBy)
	}
	answeredOnceByTheResumedTask(t, ctx, d, js, p.answers)
}

// TestA2APushAfterAKill: the built daemon starts a scheduled turn (run
// now) at the JS SDK 1.x agent, whose card offers push notifications, on a
// task the agent holds until the test releases it; the daemon is
// SIGKILLed while the agent works and started again on the same store. The
// run is resumed under the push id it recorded with its task: once the
// resumed run has read the task (so it waits), the task is released and
// the agent pushes its final update — to the URL and token it was given
// before the kill — to the new process, which accepts it and answers the
// run by push (not by the slowed poll), delivered once; the agent served
// one SendMessage. On PostgreSQL the turn's relay record (kv
// a2a-push/<id>) names the new process once the run is resumed.
func TestA2APushAfterAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	t.Run("bolt", func(t *testing.T) { testA2APushAfterAKill(t, "") })
	t.Run("postgres", func(t *testing.T) { testA2APushAfterAKill(t, pgtest.DSN(t)) })
}

func testA2APushAfterAKill(t *testing.T, dsn string) {
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	js := a2ajstest.Start(t, a2ajstest.Options{Push: true})
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secrets, _ := webhook.ParseSecrets([]string{secret})
	sink := webhook.NewSink(webhook.SinkConfig{Secrets: secrets, Keep: 100})
	srv := httptest.NewServer(sink)
	defer srv.Close()

	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`listen: %[1]s
data_dir: %[2]s
public_url: http://%[1]s
api_keys: ["%[3]s"]
log: {level: info}
agents:
  brief:
    a2a_url: "%[4]s"
    timeout: 10s
webhooks:
  endpoints:
    sink: {url: "%[5]s/hook", secret: "%[6]s"}
schedules:
  - name: brief
    cron: "0 0 29 2 *"
    agent: brief
    message: "hold:Held brief"
    to: [ { channel: webhook, endpoint: sink } ]
    timeout: 1m
`, addr, filepath.Join(dir, "data"), e2eKey, js.JSONRPC, srv.URL, secret)
	if dsn != "" {
		// A short lease: the scheduler passes to the restarted process soon.
		cfg += fmt.Sprintf("store: {driver: postgres, dsn: %q, lease_ttl: 3s}\n", dsn)
	}
	cfgPath := filepath.Join(dir, "beachd.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, bin: bin, cfg: cfgPath, base: "http://" + addr}
	d.start()
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.stderr)
		}
	}()

	req, _ := http.NewRequest("POST", d.base+"/v1/schedules/brief/run", nil)
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("run now: %d", resp.StatusCode)
	}
	type runView struct{ State, TaskID, AnsweredBy, EnvelopeID string }
	last := func() *runView {
		var list struct {
			Schedules []struct{ Last *runView }
		}
		if _, err := getJSON(d.base, "/v1/schedules", &list); err != nil || len(list.Schedules) != 1 {
			return nil
		}
		return list.Schedules[0].Last
	}
	poll.Eventually(t, 20*time.Second, "the run's task to be recorded", func() bool {
		r := last()
		return r != nil && r.State == "running" && r.TaskID != ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	getTasks := func() int {
		rec, err := js.Received(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Calls("GetTask")
	}
	// The turn's relay record on PostgreSQL, and the replica it names.
	var conn *pgx.Conn
	holder := func() (id, holder string) {
		var key string
		var val []byte
		if err := conn.QueryRow(ctx, `SELECT key, value FROM kv WHERE key LIKE 'a2a-push/%'`).Scan(&key, &val); err != nil {
			return "", ""
		}
		var rec struct{ Holder string }
		json.Unmarshal(val, &rec)
		return strings.TrimPrefix(key, "a2a-push/"), rec.Holder
	}
	var pushID, killedHolder string
	if dsn != "" {
		if conn, err = pgx.Connect(ctx, dsn); err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if pushID, killedHolder = holder(); pushID == "" || killedHolder == "" {
			t.Fatalf("the turn's relay record: push id %q, holder %q", pushID, killedHolder)
		}
	}
	d.kill()
	before := getTasks()

	d.start()
	// The resumed run reads its task first: from then on it waits, and
	// has registered for the turn's pushes.
	poll.Eventually(t, 20*time.Second, "the resumed run to read its task", func() bool { return getTasks() > before })
	if dsn != "" {
		if id, h := holder(); id != pushID || h == "" || h == killedHolder {
			t.Errorf("the resumed turn's relay record: push id %q holder %q; want push id %q held by the new process, not %q",
				id, h, pushID, killedHolder)
		}
	}
	if n, err := js.Release(ctx); err != nil || n != 1 {
		t.Fatalf("release the held task: %d, %v", n, err)
	}
	poll.Eventually(t, 30*time.Second, "the resumed run to succeed", func() bool {
		r := last()
		return r != nil && r.State == "succeeded"
	})
	if r := last(); r.AnsweredBy != "push" {
		t.Errorf("the resumed run was answered by %q, want push (the agent pushed after the restart)", r.AnsweredBy)
	}
	answers := func() int {
		n := 0
		for _, rec := range sink.Received() {
			if bytes.Contains(rec.Envelope, []byte("Today's brief: Held brief")) {
				n++
			}
		}
		return n
	}
	answeredOnceByTheResumedTask(t, ctx, d, js, answers)
}

// answeredOnceByTheResumedTask waits for the run's answer to be sent,
// stops d, and checks that the answer reached the sink once, in one
// delivery, and that the agent was sent one message: the restarted daemon
// resumed the task rather than starting another.
func answeredOnceByTheResumedTask(t *testing.T, ctx context.Context, d *daemon, js *a2ajstest.Server, answers func() int) {
	t.Helper()
	var dl struct{ Deliveries []struct{ State string } }
	poll.Eventually(t, 20*time.Second, "the answer's delivery to be sent", func() bool {
		dl.Deliveries = nil
		getJSON(d.base, "/v1/deliveries?limit=10", &dl)
		return len(dl.Deliveries) > 0 && dl.Deliveries[0].State == "sent" && answers() > 0
	})
	d.stop()
	if n := answers(); n != 1 || len(dl.Deliveries) != 1 {
		t.Errorf("the answer reached the sink %d times in %d deliveries, want once", n, len(dl.Deliveries))
	}
	rec, err := js.Received(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sends := rec.Calls("SendMessage"); sends != 1 {
		t.Errorf("the agent served %d SendMessage, want 1 (the run resumed its task): %+v", sends, rec.Events)
	}
}
