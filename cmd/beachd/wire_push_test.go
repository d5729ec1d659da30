package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// TestPushRelayPostgres: two replicas' stores on one PostgreSQL. A push
// for a turn the first replica waits for, posted to the second: the token
// is checked first (a wrong one is 401 though the turn waits), the push is
// recorded and wakes the first replica, which takes it once; the record
// keeps pushes up to a bound, then says one was dropped; a push for a turn
// nobody waits for, or no longer (closed; or its replica died: its
// liveness lease ran out, or the turn started too long ago), is 410 with
// its reason.
func TestPushRelayPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	open := func() *postgres.DB {
		db, err := postgres.Open(ctx, dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	dbA, dbB := open(), open()
	now := time.Now()
	relayA := &pushRelay{db: dbA, up: dbA, leases: dbA, holder: "replica-a", now: func() time.Time { return now }}
	relayB := &pushRelay{db: dbB, up: dbB, leases: dbB, holder: "replica-b", now: func() time.Time { return now }}
	secret := []byte(strings.Repeat("s", 32))
	pushesB := agent.NewPushes(secret, "https://b.example.org", nil)
	pushesB.UseRelay(relayB)
	post := func(id, token, body string) (int, string) {
		r := httptest.NewRequest(http.MethodPost, agent.PushPath+id, strings.NewReader(body))
		r.Header.Set(agent.PushTokenHeader, token)
		w := httptest.NewRecorder()
		pushesB.ServeHTTP(w, r)
		var e struct{ Error string }
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		return w.Code, e.Error
	}
	const id = "beachd-0123456789abcdef0123456789abcdef"
	if err := relayA.Open(ctx, id); err != nil {
		t.Fatal(err)
	}
	status := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`
	tok := pushesB.Token(id)
	if code, reason := post(id, tok+"x", status); code != 401 || !strings.Contains(reason, "token") {
		t.Errorf("wrong token for a waiting turn: %d %q", code, reason)
	}
	if code, reason := post("beachd-unknown", pushesB.Token("beachd-unknown"), status); code != 410 || !strings.Contains(reason, "finished or unknown") {
		t.Errorf("unknown turn: %d %q", code, reason)
	}
	if code, reason := post(id, tok, "[]"); code != 400 {
		t.Errorf("not an update: %d %q", code, reason)
	}
	if code, reason := post(id, tok, status); code != 204 {
		t.Fatalf("push for the other replica's turn: %d %q", code, reason)
	}
	// The waiting replica is woken with the turn's id.
	deadline := time.After(10 * time.Second)
	for woken := false; !woken; {
		select {
		case topic := <-dbA.Wakeups():
			woken = topic == agent.PushWakeTopic+" "+id
		case <-deadline:
			t.Fatal("the waiting replica was not woken")
		}
	}
	got, dropped, err := relayA.Take(ctx, id)
	if err != nil || dropped || len(got) != 1 || string(got[0]) != status {
		t.Fatalf("take: %q %v %v", got, dropped, err)
	}
	if got, _, err := relayA.Take(ctx, id); err != nil || len(got) != 0 {
		t.Fatalf("taken twice: %q %v", got, err)
	}
	// The record's bound: a push past it is dropped, and the record says so.
	if ok, err := relayB.Forward(ctx, id, []byte(status), int64(len(status))); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := relayB.Forward(ctx, id, []byte(status), int64(len(status))); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if got, dropped, err := relayA.Take(ctx, id); err != nil || !dropped || len(got) != 1 {
		t.Fatalf("take past the bound: %d pushes, dropped %v, %v", len(got), dropped, err)
	}
	// The turn is answered: its pushes are refused.
	if err := relayA.Close(ctx, id); err != nil {
		t.Fatal(err)
	}
	if code, reason := post(id, tok, status); code != 410 || !strings.Contains(reason, "finished or unknown") {
		t.Errorf("push for a finished turn: %d %q", code, reason)
	}
	// A record left by a replica that died waiting: its liveness lease ran
	// out.
	if _, ok, err := dbA.AcquireLease(ctx, store.LivenessLease("replica-a"), "replica-a", 0, time.Millisecond); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := relayA.Open(ctx, id); err != nil {
		t.Fatal(err)
	}
	if code, reason := post(id, tok, status); code != 204 {
		t.Fatalf("push while the waiting replica lives: %d %q", code, reason)
	}
	now = time.Now().Add(time.Second)
	if code, reason := post(id, tok, status); code != 410 || !strings.Contains(reason, "finished or unknown") {
		t.Errorf("push for a turn whose replica died: %d %q", code, reason)
	}
	if _, ok, err := dbA.GetKV(ctx, pushRelayKey+id); ok || err != nil {
		t.Errorf("the dead replica's record was kept (%v, %v)", ok, err)
	}
	// One opened too long ago, by a replica without a liveness lease.
	relayA.holder = ""
	if err := relayA.Open(ctx, id); err != nil {
		t.Fatal(err)
	}
	now = now.Add(pushRelayMaxAge + time.Minute)
	if code, reason := post(id, tok, status); code != 410 || !strings.Contains(reason, "finished or unknown") {
		t.Errorf("push for a turn opened too long ago: %d %q", code, reason)
	}
	if _, ok, err := dbA.GetKV(ctx, pushRelayKey+id); ok || err != nil {
		t.Errorf("the stale record was kept (%v, %v)", ok, err)
	}
}
