package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// TestA2APushOtherReplica: two replicas of the built daemon share one
// PostgreSQL; each one's public_url is the other's address, so every push
// for a turn reaches the replica that does not wait for it. A scheduled
// turn (run now) at the JS SDK 1.x agent, whose card offers pushes: the
// receiving replica records each push and wakes the waiting one, which
// takes them at the wake-up (not at a poll) and answers the turn by push;
// the agent serves no GetTask, and the answer reaches the sink once.
func TestA2APushOtherReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	dsn := pgtest.DSN(t)
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	js := a2ajstest.Start(t, a2ajstest.Options{Push: true, Slow: time.Second})
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secrets, _ := webhook.ParseSecrets([]string{secret})
	sink := webhook.NewSink(webhook.SinkConfig{Secrets: secrets, Keep: 100})
	srv := httptest.NewServer(sink)
	defer srv.Close()

	addrs := []string{freeAddr(t), freeAddr(t)}
	ds := make([]*daemon, 2)
	for i := range ds {
		dir := t.TempDir()
		cfg := fmt.Sprintf(`listen: %[1]s
data_dir: %[2]s
public_url: http://%[3]s
api_keys: ["%[4]s"]
log: {level: debug}
store:
  driver: postgres
  dsn: %[5]q
approvals: {secret: %[6]q}
agents:
  brief:
    a2a_url: "%[7]s"
    timeout: 10s
webhooks:
  endpoints:
    sink: {url: "%[8]s/hook", secret: "%[9]s"}
schedules:
  - name: brief
    cron: "0 0 29 2 *"
    agent: brief
    message: "slow:Replica brief"
    to: [ { channel: webhook, endpoint: sink } ]
    timeout: 1m
`, addrs[i], filepath.Join(dir, "data"), addrs[1-i], e2eKey, dsn, replicaSecret, js.JSONRPC, srv.URL, secret)
		path := filepath.Join(dir, "beachd.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		d := &daemon{t: t, bin: bin, cfg: path, base: "http://" + addrs[i]}
		d.start()
		t.Cleanup(func() {
			if d.cmd.ProcessState == nil {
				d.stop()
			}
		})
		ds[i] = d
	}
	logs := func() {
		for i, d := range ds {
			t.Logf("replica %d log:\n%s", i, d.stderr)
		}
	}

	req, _ := http.NewRequest("POST", ds[0].base+"/v1/schedules/brief/run", nil)
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("run now: %d", resp.StatusCode)
	}
	type runView struct{ State, AnsweredBy string }
	last := func() *runView {
		var list struct {
			Schedules []struct{ Last *runView }
		}
		if _, err := getJSON(ds[0].base, "/v1/schedules", &list); err != nil || len(list.Schedules) != 1 {
			return nil
		}
		return list.Schedules[0].Last
	}
	poll.Eventually(t, 30*time.Second, "the run to succeed", func() bool {
		r := last()
		return r != nil && r.State == "succeeded"
	})
	if r := last(); r.AnsweredBy != "push" {
		t.Errorf("the run was answered by %q, want push", r.AnsweredBy)
	}
	checkPushes(t, js, true, 1)
	answers := func() int {
		n := 0
		for _, rec := range sink.Received() {
			if bytes.Contains(rec.Envelope, []byte("Today's brief: Replica brief")) {
				n++
			}
		}
		return n
	}
	poll.Eventually(t, 20*time.Second, "the answer at the sink", func() bool { return answers() > 0 })
	rec, err := js.Received(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gets := 0
	for _, e := range rec.Events {
		if e.Kind == "call" && e.Method == "GetTask" {
			gets++
		}
	}
	if gets != 0 {
		t.Errorf("the agent served %d GetTask, want none: %+v", gets, rec.Events)
	}
	for _, d := range ds {
		d.stop()
	}
	if n := answers(); n != 1 {
		t.Errorf("the answer reached the sink %d times, want once", n)
	}
	// One replica received every push and forwarded it; the other waited,
	// and took the final one at its wake-up.
	var forwarded, taken int
	for _, d := range ds {
		for _, line := range strings.Split(d.stderr.String(), "\n") {
			switch {
			case strings.Contains(line, `msg="a2a push forwarded"`):
				forwarded++
			case strings.Contains(line, `msg="a2a push"`) && strings.Contains(line, "relayed=wake") &&
				strings.Contains(line, "COMPLETED"):
				taken++
			case strings.Contains(line, `msg="a2a push"`) && !strings.Contains(line, "relayed="):
				t.Errorf("a push reached the waiting replica: %s", line)
			}
		}
	}
	if forwarded == 0 || taken != 1 {
		t.Errorf("%d pushes forwarded, the final one taken at a wake-up %d times; want some, and once", forwarded, taken)
		logs()
	}
}
