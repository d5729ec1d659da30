package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// replicaSecret is the approvals secret every replica of a test shares.
const replicaSecret = "replica-approvals-secret-0123456789abcdef"

// startReplicas starts the built beachd n times on the PostgreSQL at dsn,
// each with its own listen address and data_dir, the lease ttl given and
// the approvals secret they must share; extra is YAML added to every
// replica's configuration (the sections the test needs). Each is ready
// when it returns; the test's end stops those still running.
func startReplicas(t *testing.T, n int, dsn string, ttl time.Duration, extra string) []*daemon {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*daemon, n)
	for i := range out {
		dir := t.TempDir()
		addr := freeAddr(t)
		cfg := fmt.Sprintf(`listen: %s
data_dir: %s
api_keys: ["%s"]
log: {level: warn}
store:
  driver: postgres
  dsn: %q
  lease_ttl: %s
approvals: {secret: %q}
%s`, addr, filepath.Join(dir, "data"), e2eKey, dsn, ttl, replicaSecret, extra)
		path := filepath.Join(dir, "beachd.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		d := &daemon{t: t, bin: bin, cfg: path, base: "http://" + addr}
		d.start()
		t.Cleanup(func() {
			if d.cmd.ProcessState == nil {
				d.stop()
			}
		})
		out[i] = d
	}
	return out
}

// readiness is a replica's /readyz answer.
type readiness struct {
	Status     string `json:"status"`
	Holder     string `json:"holder"`
	Singletons []struct {
		Name       string `json:"name"`
		Generation uint64 `json:"generation"`
	} `json:"singletons"`
}

// readiness reads the replica's /readyz with the API key (its details are
// for callers with one); ok is false when it does not answer (stopped).
func (d *daemon) readiness() (r readiness, ok bool) {
	req, _ := http.NewRequest("GET", d.base+"/readyz", nil)
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, false
	}
	defer resp.Body.Close()
	return r, json.NewDecoder(resp.Body).Decode(&r) == nil
}

// holders maps each singleton to the replicas (by index) that say they hold
// it, with the generation; stopped replicas are left out.
func holders(ds []*daemon) map[string][]int {
	out := map[string][]int{}
	for i, d := range ds {
		if d.cmd.ProcessState != nil {
			continue
		}
		r, ok := d.readiness()
		if !ok {
			continue
		}
		for _, s := range r.Singletons {
			out[s.Name] = append(out[s.Name], i)
		}
	}
	return out
}

// generationOf is the generation of name at replica i (0: not held).
func generationOf(d *daemon, name string) uint64 {
	r, _ := d.readiness()
	for _, s := range r.Singletons {
		if s.Name == name {
			return s.Generation
		}
	}
	return 0
}

// waitHolder waits up to limit until exactly one running replica holds
// name, and returns its index.
func waitHolder(t *testing.T, ds []*daemon, name string, limit time.Duration) int {
	t.Helper()
	var hs []int
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if hs = holders(ds)[name]; len(hs) == 1 {
			return hs[0]
		}
		if len(hs) > 1 {
			t.Fatalf("%s is held by replicas %v at once", name, hs)
		}
	}
	t.Fatalf("no replica holds %s after %s", name, limit)
	return -1
}

// Three replicas on one PostgreSQL: every singleton runs in exactly one;
// envelopes posted to any replica are all delivered; a killed holder's
// singletons move to another replica once its lease ran out, a stopped
// one's at once.
func TestReplicasShareOnePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	dsn := pgtest.DSN(t)
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secrets, _ := webhook.ParseSecrets([]string{secret})
	sink := webhook.NewSink(webhook.SinkConfig{Secrets: secrets, Keep: 10000})
	srv := httptest.NewServer(sink)
	defer srv.Close()
	const ttl = 10 * time.Second
	ds := startReplicas(t, 3, dsn, ttl, fmt.Sprintf("webhooks:\n  endpoints:\n    sink: {url: %q, secret: %q}\n", srv.URL+"/hook", secret))

	for _, name := range []string{singletonScheduler, singletonRetention, singletonExpiry} {
		waitHolder(t, ds, name, 5*time.Second)
	}
	var acked []string
	post := func(round int) {
		for i := 0; i < 30; i++ {
			d := ds[i%len(ds)]
			if d.cmd.ProcessState != nil {
				continue
			}
			code, body, err := d.post(fmt.Sprintf(`{"to":[{"channel":"webhook","endpoint":"sink"}],"envelope":{"role":"agent","parts":[{"text":"message %d/%d","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t%d-%d","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}}`, round, i, round, i))
			if err != nil || code != 202 {
				t.Fatalf("post %d/%d: %d %s %v", round, i, code, body, err)
			}
			var a struct{ Deliveries []struct{ ID string } }
			json.Unmarshal(body, &a)
			acked = append(acked, a.Deliveries[0].ID)
		}
	}
	delivered := func() {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			missing := 0
			for _, id := range acked {
				if sink.Count(id) == 0 {
					missing++
				}
			}
			if missing == 0 {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%d of %d acknowledged deliveries never arrived", missing, len(acked))
			}
		}
	}
	post(0)
	delivered()

	// One idempotency key posted to every replica at once: one envelope,
	// every replica answers it, and it is delivered once.
	for k := 0; k < 10; k++ {
		body := fmt.Sprintf(`{"to":[{"channel":"webhook","endpoint":"sink"}],"envelope":{"role":"agent","parts":[{"text":"keyed %d","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"k%d","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}}`, k, k)
		answers := make([]string, 3*len(ds))
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				code, b, err := ds[i%len(ds)].postKeyed(body, fmt.Sprintf("replicas-%d", k))
				if err != nil || code != 202 {
					answers[i] = fmt.Sprintf("%d %s %v", code, b, err)
					return
				}
				var a struct{ Deliveries []struct{ ID string } }
				json.Unmarshal(b, &a)
				if len(a.Deliveries) == 1 {
					answers[i] = a.Deliveries[0].ID
				}
			})
		}
		wg.Wait()
		for i, a := range answers {
			if a != answers[0] || !strings.HasPrefix(a, "dlv_") {
				t.Fatalf("key %d, request %d to replica %d: answered %q, the first %q", k, i, i%len(ds), a, answers[0])
			}
		}
		acked = append(acked, answers[0])
	}
	delivered()
	for _, id := range acked[len(acked)-10:] {
		if n := sink.Count(id); n != 1 {
			t.Errorf("keyed delivery %s arrived %d times", id, n)
		}
	}

	// Killed: no release; another replica takes over once the lease ran out.
	h := waitHolder(t, ds, singletonScheduler, time.Second)
	gen := generationOf(ds[h], singletonScheduler)
	killed := time.Now()
	ds[h].kill()
	next := waitHolder(t, ds, singletonScheduler, ttl+ttl/3+5*time.Second)
	if took := time.Since(killed); took < ttl/2 {
		t.Errorf("replica %d took the scheduler %s after the holder was killed, before its lease could have run out", next, took)
	}
	if g := generationOf(ds[next], singletonScheduler); g <= gen {
		t.Errorf("generation after takeover %d, was %d", g, gen)
	}
	post(1)
	delivered()

	// Stopped: the lease is released and the last replica takes it at once.
	ds[next].stop()
	stopped := time.Now()
	last := waitHolder(t, ds, singletonScheduler, ttl)
	if took := time.Since(stopped); took > ttl/3+3*time.Second {
		t.Errorf("replica %d took the scheduler %s after a clean stop; want at its next look (ttl/3)", last, took)
	}
	if st := sink.Stats(); st.Unverified != 0 {
		t.Errorf("%d webhooks failed signature verification", st.Unverified)
	}
}
