package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// TestA2APushDuringRestart: the built daemon on PostgreSQL starts a
// scheduled turn (run now) at the JS SDK 1.x agent, whose card offers
// pushes, and is SIGKILLed while the agent works. It is started again
// while the test holds the schema's migration lock: it has bound its
// listener and waits, opening its store. A valid push for the turn (its
// token made from the approvals secret, the task's final status) is
// posted then: it waits in the listener's queue, unanswered, until the
// lock is released; then it is answered (204 while the killed replica's
// liveness lease has not run out, its record of the turn taking the push
// that nobody will take: the resumed turn opens a new one; 410 after), and
// the run, resumed, reads the task and its answer — by poll, or by the
// agent's own push once the turn is resumed — reaches the sink once. The lease is short
// (3s) so that the scheduler passes to the new process soon.
func TestA2APushDuringRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	dsn := pgtest.DSN(t)
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	js := a2ajstest.Start(t, a2ajstest.Options{Push: true, Slow: 3 * time.Second})
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
store:
  driver: postgres
  dsn: %[4]q
  lease_ttl: 3s
approvals: {secret: %[5]q}
agents:
  brief:
    a2a_url: "%[6]s"
    timeout: 10s
webhooks:
  endpoints:
    sink: {url: "%[7]s/hook", secret: "%[8]s"}
schedules:
  - name: brief
    cron: "0 0 29 2 *"
    agent: brief
    message: "slow:Restart brief"
    to: [ { channel: webhook, endpoint: sink } ]
    timeout: 1m
`, addr, filepath.Join(dir, "data"), e2eKey, dsn, replicaSecret, js.JSONRPC, srv.URL, secret)
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
	type runView struct{ State, TaskID, AnsweredBy string }
	last := func() *runView {
		var list struct {
			Schedules []struct{ Last *runView }
		}
		if _, err := getJSON(d.base, "/v1/schedules", &list); err != nil || len(list.Schedules) != 1 {
			return nil
		}
		return list.Schedules[0].Last
	}
	var run *runView
	poll.Eventually(t, 20*time.Second, "the run's task to be recorded", func() bool {
		run = last()
		return run != nil && run.State == "running" && run.TaskID != ""
	})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The turn's push id: its record, which the waiting replica keeps.
	var key string
	if err := conn.QueryRow(ctx, `SELECT key FROM kv WHERE key LIKE 'a2a-push/%'`).Scan(&key); err != nil {
		t.Fatalf("the turn's push record: %v", err)
	}
	id := strings.TrimPrefix(key, "a2a-push/")
	d.kill()

	// Hold the migration lock: the daemon started again binds its
	// listener, then waits opening its store.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(0x6265616368)); err != nil {
		t.Fatal(err)
	}
	d.stderr = &bytes.Buffer{}
	d.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.stop()
		}
	})
	poll.Eventually(t, 20*time.Second, "the listener", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	body := fmt.Sprintf(`{"statusUpdate":{"taskId":%q,"contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}`, run.TaskID)
	token := agent.NewPushes([]byte(replicaSecret), "", nil).Token(id)
	type answer struct {
		code int
		body string
		err  error
	}
	answered := make(chan answer, 1)
	wrote := make(chan struct{})
	go func() {
		req, _ := http.NewRequest("POST", d.base+agent.PushPath+id, strings.NewReader(body))
		req.Header.Set(agent.PushTokenHeader, token)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { close(wrote) }}))
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- answer{code: resp.StatusCode, body: string(b)}
	}()
	select {
	case <-wrote:
	case a := <-answered:
		t.Fatalf("the push was answered before it was written: %+v", a)
	case <-time.After(20 * time.Second):
		t.Fatal("the push was not written")
	}
	select {
	case a := <-answered:
		t.Fatalf("the push was answered while the store was opening: %+v", a)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("the push was not answered once the store opened")
	}
	var reason struct{ Error string }
	_ = json.Unmarshal([]byte(a.body), &reason)
	if a.err != nil || (a.code != http.StatusNoContent && !(a.code == http.StatusGone && strings.Contains(reason.Error, "finished or unknown"))) {
		t.Errorf("the push posted during the restart: %d %q %v", a.code, a.body, a.err)
	}
	t.Logf("the push posted during the restart: %d %s", a.code, reason.Error)

	poll.Eventually(t, 30*time.Second, "the resumed run to succeed", func() bool {
		r := last()
		return r != nil && r.State == "succeeded"
	})
	// The resumed run reads its task first, then takes the agent's pushes
	// under the turn's push id: its answer came by poll (the agent had
	// finished, or pushed, before) or by the agent's push after it.
	if r := last(); r.AnsweredBy != agent.AnsweredByPoll && r.AnsweredBy != agent.AnsweredByPush {
		t.Errorf("the resumed run was answered by %q, want poll or push", r.AnsweredBy)
	} else {
		t.Logf("the resumed run was answered by %s", r.AnsweredBy)
	}
	answers := func() int {
		n := 0
		for _, rec := range sink.Received() {
			if bytes.Contains(rec.Envelope, []byte("Today's brief: Restart brief")) {
				n++
			}
		}
		return n
	}
	poll.Eventually(t, 20*time.Second, "the answer at the sink", func() bool { return answers() > 0 })
	d.stop()
	if n := answers(); n != 1 {
		t.Errorf("the answer reached the sink %d times, want once", n)
	}
}
