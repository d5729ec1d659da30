package api

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
)

const readOnlyKey = "read-only-key-0123456789"

// newQueryServer is newTestServer with a read-only key too.
func newQueryServer(t *testing.T) (*httptest.Server, *bolt.DB) {
	t.Helper()
	db := storetest.Open(t, bolt.Options{})
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, db)
	if err != nil {
		t.Fatal(err)
	}
	ing := NewIngester(IngestConfig{Registry: envelope.NewRegistry(), Limits: envelope.Limits{MaxBytes: 4096},
		Channels: map[string]bool{"email": true, "webhook": true}, Endpoints: map[string]bool{"ops": true},
		Agents: map[string]bool{"travel": true}}, db, nil, nil, m.Ingested)
	s, err := New(Config{APIKeys: []string{key}, ReadKeys: []string{readOnlyKey}, MaxBodyBytes: 8192}, db, ing, m, reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, db
}

// kill makes every due delivery of channel dead.
func kill(t *testing.T, db *bolt.DB, channel string) {
	t.Helper()
	ds, err := db.Claim(context.Background(), 100, time.Minute, func(d *store.Delivery) bool { return d.Channel == channel })
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if _, err := db.Record(context.Background(), d.ID, d.LeaseUntil, store.Outcome{State: store.StateDead, DeadReason: "410 Gone",
			Attempt: store.Attempt{N: 1, At: time.Now(), Outcome: "dead"}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadOnlyKeyReadsButNeverChanges(t *testing.T) {
	srv, db := newQueryServer(t)
	if code, out := do(t, srv, "POST", "/v1/deliveries", readOnlyKey, request(`[{"channel":"webhook","endpoint":"ops"}]`)); code != 403 || out["error"] != "this API key is read-only" {
		t.Fatalf("read-only ingest: %d %v", code, out)
	}
	if code, _ := do(t, srv, "POST", "/v1/deliveries", key, request(`[{"channel":"webhook","endpoint":"ops"}]`)); code != 202 {
		t.Fatalf("ingest: %d", code)
	}
	kill(t, db, "webhook")
	for _, p := range []string{"/v1/deliveries", "/v1/deliveries?state=dead", "/v1/deliveries/stats"} {
		if code, _ := do(t, srv, "GET", p, readOnlyKey, ""); code != 200 {
			t.Errorf("read-only GET %s: %d", p, code)
		}
	}
	if code, _ := do(t, srv, "POST", "/v1/deliveries/retry", readOnlyKey, `{"state":"dead","since":"2020-01-01T00:00:00Z"}`); code != 403 {
		t.Errorf("read-only bulk retry: %d", code)
	}
	if code, _ := do(t, srv, "GET", "/v1/deliveries", "not-a-key-0123456789", ""); code != 401 {
		t.Errorf("unknown key: %d", code)
	}
	if st, _ := db.CountByState(context.Background()); st[store.StateDead] != 1 {
		t.Errorf("a read-only request changed the store: %v", st)
	}
}

func TestFiltersStatsAndBulkRetry(t *testing.T) {
	srv, db := newQueryServer(t)
	for _, to := range []string{`[{"channel":"webhook","endpoint":"ops"}]`, `[{"channel":"webhook","endpoint":"ops"}]`, `[{"channel":"email","address":"ann@example.org"}]`} {
		if code, out := do(t, srv, "POST", "/v1/deliveries", key, `{"envelope":`+env+`,"to":`+to+`,"agent":"travel"}`); code != 202 {
			t.Fatalf("ingest: %d %v", code, out)
		}
	}
	kill(t, db, "webhook")
	q := func(v url.Values) int {
		code, out := do(t, srv, "GET", "/v1/deliveries?"+v.Encode(), key, "")
		if code != 200 {
			t.Fatalf("GET %v: %d %v", v, code, out)
		}
		return len(out["deliveries"].([]any))
	}
	for _, c := range []struct {
		v    url.Values
		want int
	}{
		{url.Values{"channel": {"webhook"}}, 2},
		{url.Values{"channel": {"email"}, "to": {"ANN@"}}, 1},
		{url.Values{"agent": {"travel"}, "state": {"dead"}}, 2},
		{url.Values{"agent": {"other"}}, 0},
		{url.Values{"since": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}, 0},
		{url.Values{"until": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "channel": {"email"}}, 1},
	} {
		if n := q(c.v); n != c.want {
			t.Errorf("GET %v: %d deliveries, want %d", c.v, n, c.want)
		}
	}
	code, out := do(t, srv, "GET", "/v1/deliveries?since=yesterday&state=lost", key, "")
	if code != 400 || len(out["problems"].([]any)) != 2 {
		t.Errorf("bad filters: %d %v", code, out)
	}
	code, out = do(t, srv, "GET", "/v1/deliveries/stats", key, "")
	if code != 200 || out["dead"] != float64(2) || out["created1h"] != float64(3) {
		t.Errorf("stats: %d %v", code, out)
	}
	// The dry run counts and changes nothing; the real one retries.
	code, out = do(t, srv, "POST", "/v1/deliveries/retry", key, `{"state":"dead","since":"2020-01-01T00:00:00Z","dry_run":true}`)
	if code != 200 || out["count"] != float64(2) || out["dryRun"] != true {
		t.Fatalf("dry run: %d %v", code, out)
	}
	if st, _ := db.CountByState(context.Background()); st[store.StateDead] != 2 {
		t.Fatalf("the dry run changed the store: %v", st)
	}
	code, out = do(t, srv, "POST", "/v1/deliveries/retry", key, `{"state":"dead","since":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	if code != 200 || out["count"] != float64(0) {
		t.Errorf("since the future: %d %v", code, out)
	}
	code, out = do(t, srv, "POST", "/v1/deliveries/retry", key, `{"state":"dead","since":"2020-01-01T00:00:00Z","channel":"webhook"}`)
	if code != 200 || out["count"] != float64(2) {
		t.Fatalf("retry: %d %v", code, out)
	}
	if st, _ := db.CountByState(context.Background()); st[store.StateDead] != 0 || st[store.StateQueued] != 3 {
		t.Errorf("after the retry: %v", st)
	}
	for _, body := range []string{`{"state":"sent","since":"2020-01-01T00:00:00Z"}`, `{"state":"dead"}`, `{"state":"dead","since":"2020-01-01T00:00:00Z","extra":1}`} {
		if code, out := do(t, srv, "POST", "/v1/deliveries/retry", key, body); code != 400 {
			t.Errorf("%s: %d %v", body, code, out)
		}
	}
}

func FuzzParseDeliveryFilter(f *testing.F) {
	f.Add("channel=email&state=dead&since=2026-01-02T15:04:05Z&to=ann")
	f.Add("until=2026-13-40T99:00:00Z&before=dlv_x")
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		flt, err := ParseDeliveryFilter(v)
		if err == nil && (len(flt.To) > 256 || flt.State != "" && !flt.State.Valid()) {
			t.Fatalf("accepted %+v", flt)
		}
	})
}
