package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/postgres"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
	"github.com/cool-ai/beachd/store/storetest"
)

const storeConfigBase = "listen: 127.0.0.1:1\napi_keys: [\"0123456789abcdef\"]\n"

// The store section is checked like the other keys: each problem names its
// key and its place in the file, and a password in a DSN is never shown.
func TestConfigStoreSection(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string // empty: valid
	}{
		{"default", "", nil},
		{"bolt", "store: {driver: bolt}\n", nil},
		{"postgres", "store:\n  driver: postgres\n  dsn: postgres://beachd:pw@db.internal:5432/beachd\n  lease_ttl: 30s\n", nil},
		{"unknown driver", "store:\n  driver: mysql\n", []string{"line 4, column 11: store.driver: must be bolt or postgres"}},
		{"postgres without dsn", "store:\n  driver: postgres\n", []string{"store.dsn: required with driver postgres"}},
		{"dsn with bolt", "store:\n  dsn: postgres://db/x\n", []string{"line 4, column 8: store.dsn: only with driver postgres"}},
		{"bad dsn", "store:\n  driver: postgres\n  dsn: \"postgres://u:secretpw@host:notaport/db\"\n", []string{"line 5, column 8: store.dsn: not a PostgreSQL connection string"}},
		{"short ttl", "store:\n  lease_ttl: 1s\n", []string{"line 4, column 14: store.lease_ttl: must be between 3s and 10m0s"}},
		{"unknown key", "store:\n  ttl: 1s\n", []string{"store.ttl", "not a known key"}},
	} {
		_, _, err := checkConfig([]byte(storeConfigBase+tt.yaml), "c.yaml", env(nil), true)
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Errorf("%s: the error shows the password: %v", tt.name, err)
		}
	}
}

// configCheck runs `beachd config check` on a file with the store section.
func configCheck(t *testing.T, storeYAML string) (code int, stdout, stderr string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(storeConfigBase+storeYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code = run(context.Background(), []string{"config", "check", "--config", path}, func(string) string { return "" }, &out, &errb)
	return code, out.String(), errb.String()
}

// config check connects to the database of store.driver postgres and says
// its schema version, without creating anything; a database it cannot
// reach is a problem at store.dsn.
func TestConfigCheckConnectsToPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	code, out, errs := configCheck(t, fmt.Sprintf("store:\n  driver: postgres\n  dsn: %q\n", dsn))
	if code != 0 || !strings.Contains(out, "no beachd tables yet; beachd serve creates them (schema version") || !strings.HasSuffix(out, ": ok\n") {
		t.Fatalf("fresh schema: exit %d\n%s%s", code, out, errs)
	}
	db, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, out, errs = configCheck(t, fmt.Sprintf("store:\n  driver: postgres\n  dsn: %q\n", dsn))
	if want := fmt.Sprintf("schema version %d, up to date", postgres.SchemaVersion()); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("migrated schema: exit %d, want %q\n%s%s", code, want, out, errs)
	}

	code, out, errs = configCheck(t, "store:\n  driver: postgres\n  dsn: \"postgres://root:secretpw@127.0.0.1:1/test?connect_timeout=2\"\n")
	if code != 1 || !strings.Contains(errs, "line 5, column 8: store.dsn: cannot connect to root@127.0.0.1:1/test") || strings.Contains(errs+out, "secretpw") {
		t.Fatalf("unreachable database: exit %d\n%s%s", code, out, errs)
	}
}

// /readyz and the metrics say which singletons this replica holds: on the
// embedded store, all of them, each under its lease. /readyz says so to a
// caller with an API key.
func TestReadyzNamesTheSingletonsHeld(t *testing.T) {
	d := startDev(t)
	req, _ := http.NewRequest("GET", d.base+"/readyz", nil)
	req.Header.Set("Authorization", "Bearer "+d.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ready struct {
		Status, Store, Holder string
		Singletons            []struct {
			Name       string
			Generation uint64
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ready.Singletons {
		names = append(names, s.Name)
		if s.Generation == 0 {
			t.Errorf("singleton %s at generation 0", s.Name)
		}
	}
	got := strings.Join(names, " ")
	if resp.StatusCode != 200 || ready.Status != "ready" || ready.Store != "bolt" || ready.Holder == "" ||
		!strings.HasPrefix(got, "approval-expiry imap:") || !strings.HasSuffix(got, " retention scheduler") {
		t.Fatalf("/readyz: %d %+v", resp.StatusCode, ready)
	}
	mresp, err := http.Get(d.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	metrics, _ := io.ReadAll(mresp.Body)
	for _, want := range []string{`beachd_singleton_held{name="scheduler"} 1`, `beachd_singleton_generation{name="retention"} 1`} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Each store wake-up topic reaches the functions registered for it, and
// only those; an unknown topic is ignored.
func TestReadyWakeupsReachTheirWorkers(t *testing.T) {
	a := &app{}
	var got []string
	a.onWake(store.WakeDeliveries, func() { got = append(got, "dispatcher") })
	a.onWake(store.WakeTurns, func() { got = append(got, "turns") })
	a.onWake(store.WakeInjections, func() { got = append(got, "injector") })
	ch := make(chan string, 8)
	for _, topic := range []string{store.WakeTurns, "other", store.WakeInjections, store.WakeDeliveries} {
		ch <- topic
	}
	close(ch)
	routeWakeups(context.Background(), ch, a.wakes)
	if s := strings.Join(got, " "); s != "turns injector dispatcher" {
		t.Fatalf("woken: %s", s)
	}
}

// Replicas without approvals.secret share one the first of them wrote
// into the store: replicas starting together agree on it (here on the
// embedded store, whose leases and KV every backend mirrors).
func TestReadySharedApprovalKey(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	keys := make([]string, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := sharedApprovalKey(context.Background(), db, fmt.Sprintf("replica-%d", i))
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys {
		if len(k) < 32 || k != keys[0] {
			t.Fatalf("replicas got the secrets %q", keys)
		}
	}
	if k, err := sharedApprovalKey(context.Background(), db, "replica-late"); err != nil || k != keys[0] {
		t.Fatalf("a replica started later got %q, %v; want %q", k, err, keys[0])
	}
}

// A replica that died holding the writer's lease before writing the
// secret does not stop the others: its lease runs out and the next writes.
func TestSharedApprovalKeyAfterAWriterDied(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	db := storetest.Open(t, bolt.Options{Now: clock.Now})
	if _, ok, err := db.AcquireLease(context.Background(), approvalKeyKV, "dead-replica", 0, 30*time.Second); err != nil || !ok {
		t.Fatalf("take the writer's lease: %v %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := sharedApprovalKey(ctx, db, "live-replica"); err == nil {
		t.Fatal("a replica wrote the secret while another held the writer's lease")
	}
	clock.Advance(31 * time.Second)
	k, err := sharedApprovalKey(context.Background(), db, "live-replica")
	if err != nil || len(k) < 32 {
		t.Fatalf("after the dead writer's lease ran out: %q %v", k, err)
	}
}
