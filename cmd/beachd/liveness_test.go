package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// A replica on PostgreSQL leases no job before its liveness lease is in
// the store: a job leased before it would, if the replica died then, wait
// for its own lease (four and a half minutes with email configured)
// instead of being re-queued once the liveness lease ran out. Here the
// liveness lease is held by someone else when the replica starts: it
// stays "starting: liveness", and a delivery posted meanwhile stays
// queued; once the lease comes free the replica takes it, then sends.
func TestJobsWaitForTheLivenessLease(t *testing.T) {
	dsn := pgtest.DSN(t)
	secrets, _ := webhook.ParseSecrets([]string{testWhsec})
	hooks := webhook.NewSink(webhook.SinkConfig{Secrets: secrets, Keep: 10})
	hookSrv := httptest.NewServer(hooks)
	defer hookSrv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	key := e2eKey // postMarked's
	cfg, err := config.Parse(fmt.Appendf(nil, `listen: %s
data_dir: %s
api_keys: [%q]
store: {driver: postgres, dsn: %q, lease_ttl: 3s}
webhooks:
  endpoints:
    sink: {url: "%s/hook", secret: %q}
`, ln.Addr(), t.TempDir(), key, dsn, hookSrv.URL, testWhsec), "beachd.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := buildApp(ctx, cfg, reg, slog.New(slog.DiscardHandler), io.Discard, false, ln)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	live := store.LivenessLease(a.singletons.Holder())
	other, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer other.Close()
	blocker, ok, err := other.AcquireLease(context.Background(), live, "someone-else", 0, time.Hour)
	if err != nil || !ok {
		cancel()
		t.Fatalf("hold %s: %v %v", live, ok, err)
	}
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()
	base := "http://" + ln.Addr().String()
	get := func(path string, v any) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode
	}
	acked := postMarked(http.DefaultClient, base, "live000001", `{"channel":"webhook","endpoint":"sink"}`)
	if len(acked) != 1 {
		t.Fatalf("delivery not accepted: %+v", acked)
	}
	id := acked[0].id

	// Until the replica holds its liveness lease, nothing is leased: the
	// replica says why it is not ready, and the delivery is queued. (A
	// replica that leases jobs regardless sends it: at the sink before the
	// lease came free.)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if hooks.Count(id) > 0 {
			t.Fatalf("delivery %s sent while %s was another's", id, live)
		}
		var ready struct{ Status, Reason string }
		code := get("/readyz", &ready)
		var del struct{ State string }
		get("/v1/deliveries/"+id, &del)
		if code == http.StatusServiceUnavailable && strings.Contains(ready.Reason, "liveness") && del.State == "queued" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica neither sent delivery %s nor waited for its liveness lease: /readyz %d %+v, delivery %s", id, code, ready, del.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := other.ReleaseLease(context.Background(), live, "someone-else", blocker.Generation); err != nil {
		t.Fatal(err)
	}
	var attempts []store.Attempt
	for len(attempts) == 0 || hooks.Count(id) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s not sent after the liveness lease came free: attempts %+v, at the sink %d", id, attempts, hooks.Count(id))
		}
		time.Sleep(20 * time.Millisecond)
		if attempts, err = other.Attempts(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	var since time.Time
	for _, h := range a.singletons.Held() {
		if h.Name == live {
			since = h.Since
		}
	}
	if since.IsZero() || attempts[0].At.Before(since) {
		t.Fatalf("delivery %s attempted at %s; the replica took %s at %s", id, attempts[0].At, live, since)
	}
}
