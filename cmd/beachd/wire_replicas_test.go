package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

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
// only those (a topic with an argument, its name's with the argument); an
// unknown topic is ignored.
func TestReadyWakeupsReachTheirWorkers(t *testing.T) {
	a := &app{}
	var got []string
	a.onWake(store.WakeDeliveries, func() { got = append(got, "dispatcher") })
	a.onWake(store.WakeTurns, func() { got = append(got, "turns") })
	a.onWake(store.WakeInjections, func() { got = append(got, "injector") })
	a.onWakeArg("a2a-push", func(id string) { got = append(got, "push:"+id) })
	ch := make(chan string, 8)
	for _, topic := range []string{store.WakeTurns, "other", "a2a-push beachd-1", "other x", store.WakeInjections, store.WakeDeliveries} {
		ch <- topic
	}
	close(ch)
	routeWakeups(context.Background(), ch, a.wakes, a.wakeArgs)
	if s := strings.Join(got, " "); s != "turns push:beachd-1 injector dispatcher" {
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
