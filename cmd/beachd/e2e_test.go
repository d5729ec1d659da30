package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/webhook"
)

// buildBinary builds cmd/beachd once per test binary.
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "beachd-e2e-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "beachd")
	out, err := exec.Command("go", "build", "-race", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

type daemon struct {
	t      *testing.T
	bin    string
	cfg    string
	base   string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (d *daemon) start() {
	d.t.Helper()
	d.stderr = &bytes.Buffer{}
	d.cmd = exec.Command(d.bin, "serve", "--config", d.cfg)
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(d.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("beachd did not become ready:\n%s", d.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
}

func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		d.t.Errorf("beachd did not stop on SIGTERM within 20s:\n%s", d.stderr)
		d.kill()
	}
}

const e2eKey = "e2e-key-0123456789abcdef"

// newDaemon writes the configuration of the built beachd bin: listening on
// addr, its data_dir in a fresh directory, its public_url http://public,
// the test API key, and the sections in yaml. It returns the daemon, not
// started.
func newDaemon(t *testing.T, bin, addr, public, yaml string) *daemon {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`listen: %s
data_dir: %s
public_url: http://%s
api_keys: ["%s"]
%s`, addr, filepath.Join(dir, "data"), public, e2eKey, yaml)
	path := filepath.Join(dir, "beachd.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return &daemon{t: t, bin: bin, cfg: path, base: "http://" + addr}
}

// runNow fires the schedule name by hand and returns the HTTP status of
// the answer.
func (d *daemon) runNow(name string) int {
	d.t.Helper()
	req, _ := http.NewRequest("POST", d.base+"/v1/schedules/"+name+"/run", nil)
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// scheduleRun is a schedule's last run as /v1/schedules lists it.
type scheduleRun struct{ State, TaskID, AnsweredBy string }

// lastRun returns the last run of the daemon's only schedule; nil when it
// has none, or the daemon does not answer.
func (d *daemon) lastRun() *scheduleRun {
	var list struct {
		Schedules []struct{ Last *scheduleRun }
	}
	if _, err := getJSON(d.base, "/v1/schedules", &list); err != nil || len(list.Schedules) != 1 {
		return nil
	}
	return list.Schedules[0].Last
}

// Credentials the daemon tests' fake Twilio (twiliotest) accepts.
const (
	fakeTwilioAccount = "AC0123456789abcdef0123456789abcdef"
	fakeTwilioToken   = "0123456789abcdef0123456789abcdef"
)

func (d *daemon) post(body string) (int, []byte, error) {
	return d.postKeyed(body, "")
}

// postKeyed is post with an Idempotency-Key (none when key is "").
func (d *daemon) postKeyed(body, key string) (int, []byte, error) {
	req, _ := http.NewRequest("POST", d.base+"/v1/deliveries", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, nil
}

// TestCrashLoopLosesNothing runs the built daemon, posts envelopes while a
// slow webhook receiver keeps deliveries in flight, SIGKILLs the daemon
// several times mid-delivery, restarts it, and checks that every
// acknowledged delivery reached the receiver, with duplicates (recognisable
// by webhook-id) only for deliveries in flight at a kill.
func TestCrashLoopLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secrets, _ := webhook.ParseSecrets([]string{secret})
	sink := webhook.NewSink(webhook.SinkConfig{Secrets: secrets, Keep: 100000})
	var slow sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slow.Add(1)
		defer slow.Done()
		time.Sleep(20 * time.Millisecond) // keeps deliveries in flight when the kill comes
		sink.ServeHTTP(w, r)
	}))
	defer srv.Close()

	dir := t.TempDir()
	addr := freeAddr(t)
	const workers = 8
	cfg := fmt.Sprintf(`listen: %s
data_dir: %s
api_keys: ["%s"]
log: {level: warn}
dispatch: {workers: %d}
webhooks:
  endpoints:
    sink: {url: "%s/hook", secret: "%s"}
`, addr, filepath.Join(dir, "data"), e2eKey, workers, srv.URL, secret)
	cfgPath := filepath.Join(dir, "beachd.yaml")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	d := &daemon{t: t, bin: bin, cfg: cfgPath, base: "http://" + addr}

	const rounds, perRound = 5, 40
	acked := map[string]bool{}
	for round := 0; round < rounds; round++ {
		d.start()
		for i := 0; i < perRound; i++ {
			code, body, err := d.post(fmt.Sprintf(`{"to":[{"channel":"webhook","endpoint":"sink"}],"envelope":{"role":"agent","parts":[{"text":"message %d/%d","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t%d","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}}`, round, i, i))
			if err != nil || code != 202 {
				t.Fatalf("round %d post %d: %d %s %v", round, i, code, body, err)
			}
			var a struct{ Deliveries []struct{ ID string } }
			json.Unmarshal(body, &a)
			acked[a.Deliveries[0].ID] = true
		}
		d.kill() // SIGKILL with deliveries queued and in flight
	}
	d.start()
	deadline := time.Now().Add(60 * time.Second)
	for {
		missing := 0
		for id := range acked {
			if sink.Count(id) == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged deliveries never arrived\n%s", missing, len(acked), d.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := sink.Stats()
	if st.Unverified != 0 {
		t.Errorf("%d webhooks failed signature verification", st.Unverified)
	}
	// Each kill can interrupt at most `workers` sends in flight.
	if st.Duplicates > rounds*workers {
		t.Errorf("%d duplicates for %d kills of %d workers", st.Duplicates, rounds, workers)
	}
	t.Logf("acknowledged %d, delivered %d unique, duplicates %d, kills %d", len(acked), st.Unique, st.Duplicates, rounds)

	// Every delivery is recorded as sent.
	req, _ := http.NewRequest("GET", d.base+"/v1/deliveries?state=sent&limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	deadline = time.Now().Add(20 * time.Second)
	for {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Deliveries []json.RawMessage }
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if len(out.Deliveries) == len(acked) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries recorded as sent", len(out.Deliveries), len(acked))
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.stop()
}

// TestBadDatabaseIsRefused: a corrupt or newer-schema file stops start-up
// with an explanation and is left untouched.
func TestBadDatabaseIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o700)
	garbage := bytes.Repeat([]byte("not a database "), 1000)
	dbPath := filepath.Join(dir, "data", "beachd.db")
	os.WriteFile(dbPath, garbage, 0o600)
	cfg := fmt.Sprintf("listen: %s\ndata_dir: %s\napi_keys: [\"%s\"]\n", freeAddr(t), filepath.Join(dir, "data"), e2eKey)
	os.WriteFile(filepath.Join(dir, "beachd.yaml"), []byte(cfg), 0o600)
	out, err := exec.Command(bin, "serve", "--config", filepath.Join(dir, "beachd.yaml")).CombinedOutput()
	if err == nil {
		t.Fatal("beachd started on a corrupt database")
	}
	if !bytes.Contains(out, []byte("not a readable beachd database")) {
		t.Errorf("no explanation:\n%s", out)
	}
	after, _ := os.ReadFile(dbPath)
	if !bytes.Equal(after, garbage) {
		t.Error("the corrupt file was rewritten")
	}
}
