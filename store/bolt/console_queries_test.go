package bolt

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
)

func TestConsoleQueries(t *testing.T) {
	c := fakeclock.New(time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC))
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	ctx := context.Background()
	env := json.RawMessage(`{"role":"agent","parts":[],"meta":{}}`)
	var ids []string
	for i, ch := range []string{"email", "webhook", "webhook", "sms", "webhook"} {
		res, err := db.Ingest(ctx, store.Ingest{Envelope: env, Agent: []string{"a", "b"}[i%2], Deliveries: []store.NewDelivery{{Channel: ch, To: "to-" + ch}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Deliveries[0].ID)
		c.Advance(10 * time.Minute)
	}
	// The three webhooks die, at 01:50, then 02:00 (after another hour).
	claimed, err := db.Claim(ctx, 10, time.Minute, func(d *store.Delivery) bool { return d.Channel == "webhook" })
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim %d %v", len(claimed), err)
	}
	for i, d := range claimed {
		if i == 2 {
			c.Advance(61 * time.Minute)
		}
		if _, err := db.Record(ctx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateDead, Attempt: store.Attempt{N: 1, At: c.Now(), Outcome: "dead"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Newest first, filters, paging.
	got, more, err := db.QueryDeliveries(ctx, store.DeliveryFilter{}, 2)
	if err != nil || !more || len(got) != 2 || got[0].ID != ids[4] || got[1].ID != ids[3] {
		t.Fatalf("first page: %v %v %v", ids, got, err)
	}
	got, more, _ = db.QueryDeliveries(ctx, store.DeliveryFilter{Before: got[1].ID}, 10)
	if more || len(got) != 3 || got[0].ID != ids[2] || got[2].ID != ids[0] {
		t.Fatalf("second page: %v", got)
	}
	got, _, _ = db.QueryDeliveries(ctx, store.DeliveryFilter{Channel: "webhook", Agent: "a", State: store.StateDead}, 10)
	if len(got) != 2 || got[0].ID != ids[4] || got[1].ID != ids[2] {
		t.Fatalf("webhook, agent a, dead: %v", got)
	}
	start := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	got, _, _ = db.QueryDeliveries(ctx, store.DeliveryFilter{Since: start.Add(10 * time.Minute), Until: start.Add(30 * time.Minute), To: "TO-WEB"}, 10)
	if len(got) != 2 || got[0].ID != ids[2] || got[1].ID != ids[1] {
		t.Fatalf("time window: %v", got)
	}
	// Stats as of now (02:51): the dead of the last hour and day.
	st, err := db.DeliveryStats(ctx, c.Now())
	if err != nil || st.Dead != 3 || st.Dead1h != 1 || st.Dead24h != 3 || st.ByState[store.StateQueued] != 2 || st.Created1h != 0 || st.Created24 != 5 {
		t.Fatalf("stats %+v %v", st, err)
	}
	// Dead since 01:55: only the last one; retrying it leaves the others.
	dead, _, _ := db.DeadSince(ctx, start.Add(55*time.Minute), "")
	if len(dead) != 1 {
		t.Fatalf("dead since: %v", dead)
	}
	if n, err := db.RetryDeadSince(ctx, start.Add(55*time.Minute), "webhook"); n != 1 || err != nil {
		t.Fatalf("retry: %d %v", n, err)
	}
	if dead, _, _ := db.DeadSince(ctx, start, "webhook"); len(dead) != 2 {
		t.Fatalf("after the retry: %v", dead)
	}
	if dead, _, _ := db.DeadSince(ctx, start, "email"); len(dead) != 0 {
		t.Fatalf("dead email: %v", dead)
	}
}
