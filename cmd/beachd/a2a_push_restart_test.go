package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/agent"
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
	p := startPushBrief(t, 3*time.Second, "Restart brief")
	addr := freeAddr(t)
	d := newDaemon(t, bin, addr, addr, fmt.Sprintf(`log: {level: info}
store:
  driver: postgres
  dsn: %q
  lease_ttl: 3s
approvals: {secret: %q}
`, dsn, replicaSecret)+p.yaml)
	d.start()
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.stderr)
		}
	}()
	d.runNow("brief")
	last := d.lastRun
	var run *scheduleRun
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
	d.cmd = exec.Command(bin, "serve", "--config", d.cfg)
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
	answers := p.answers
	poll.Eventually(t, 20*time.Second, "the answer at the sink", func() bool { return answers() > 0 })
	d.stop()
	if n := answers(); n != 1 {
		t.Errorf("the answer reached the sink %d times, want once", n)
	}
}
