package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
)

const key = "test-key-0123456789"

const env = `{"role":"agent","parts":[{"text":"Your tasks for today: T12, T15, T18.","metadata":{"partType":"response"}}],
"meta":{"sessionId":"sess_1","turnId":"turn_1","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}`

func newTestServer(t *testing.T) (*httptest.Server, *bolt.DB) {
	t.Helper()
	db := storetest.Open(t, bolt.Options{})
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, db)
	if err != nil {
		t.Fatal(err)
	}
	ing := NewIngester(IngestConfig{Registry: envelope.NewRegistry(), Limits: envelope.Limits{MaxBytes: 4096},
		Channels:  map[string]bool{"email": true, "webhook": true, "sms": true},
		Endpoints: map[string]bool{"ops": true}, Agents: map[string]bool{"travel": true, "other": true}}, db, nil, nil, m.Ingested)
	s, err := New(Config{APIKeys: []string{"another-key-000000", key}, MaxBodyBytes: 8192}, db, ing, m, reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, db
}

func do(t *testing.T, srv *httptest.Server, method, path, auth string, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func request(to string) string {
	return fmt.Sprintf(`{"envelope": %s, "to": %s}`, env, to)
}

func TestPostDeliveries(t *testing.T) {
	srv, db := newTestServer(t)
	code, out := do(t, srv, "POST", "/v1/deliveries", key, request(`[{"channel":"email","address":"Alice <alice@EXAMPLE.org>"},{"channel":"webhook","endpoint":"ops"}]`))
	if code != 202 {
		t.Fatalf("status %d: %v", code, out)
	}
	ds := out["deliveries"].([]any)
	if len(ds) != 2 || ds[0].(map[string]any)["to"] != "alice@example.org" || ds[0].(map[string]any)["status"] != "queued" {
		t.Fatalf("deliveries = %v", ds)
	}
	id := out["id"].(string)
	code, view := do(t, srv, "GET", "/v1/deliveries/"+id, key, "")
	if code != 200 || len(view["deliveries"].([]any)) != 2 {
		t.Fatalf("GET %s: %d %v", id, code, view)
	}
	code, list := do(t, srv, "GET", "/v1/deliveries?state=queued", key, "")
	if code != 200 || len(list["deliveries"].([]any)) != 2 {
		t.Fatalf("list: %d %v", code, list)
	}
	counts, _ := db.CountByState(t.Context())
	if counts[store.StateQueued] != 2 {
		t.Fatalf("stored %v", counts)
	}
}

func problems(out map[string]any) []string {
	var paths []string
	ps, _ := out["problems"].([]any)
	for _, p := range ps {
		paths = append(paths, p.(map[string]any)["path"].(string))
	}
	return paths
}

func TestBadRequestsListEveryProblemAndStoreNothing(t *testing.T) {
	srv, db := newTestServer(t)
	badEnv := `{"role":"agent","parts":[{"text":"x","metadata":{"partType":"nope"}},{"data":{"approvalId":"a","decision":"granted","decidedAt":"2026-01-01T00:00:00Z"},"metadata":{"partType":"approval-response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}`
	tests := []struct {
		name, body string
		want       []string
	}{
		{"malformed JSON", `{"envelope": `, []string{""}},
		{"unknown part type and approval-response, bad recipients", fmt.Sprintf(`{"envelope": %s, "to": [{"channel":"fax","address":"1"},{"channel":"sms","address":"07700 900123"},{"channel":"webhook","endpoint":"nope"},{"channel":"email","address":"not an address"},{"channel":"whatsapp","address":"+447700900123"}], "agent": "ghost"}`, badEnv),
			[]string{"envelope.parts[0].metadata.partType", "envelope.parts[1].metadata.partType", "to[0].channel", "to[1].address", "to[2].endpoint", "to[3].address", "to[4].channel", "agent"}},
		{"empty parts, no recipients", `{"envelope": {"role":"agent","parts":[],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}, "to": []}`,
			[]string{"envelope.parts", "to"}},
		{"missing envelope", `{"to":[{"channel":"email","address":"a@b.org"}]}`, []string{"envelope"}},
		{"unknown top-level field", `{"envelope": {}, "to": [], "priority": 1}`, []string{"priority"}},
		{"unknown recipient field", request(`[{"channel":"email","address":"a@b.org"},{"type":"sms","address":"+447700900123"}]`), []string{"to[1].type"}},
		{"unknown envelope field", `{"envelope": {"role":"agent","parts":[{"text":"x","metdata":{}}]}, "to": []}`, []string{"envelope.parts[0].metdata"}},
		{"duplicate recipient", request(`[{"channel":"email","address":"a@b.org"},{"channel":"email","address":"a@B.ORG"}]`), []string{"to[1]"}},
		// Approvals bind a mailbox case-insensitively: two spellings would
		// get two handles and neither answer would count.
		{"duplicate mailbox in another case", request(`[{"channel":"email","address":"Alice@b.org"},{"channel":"email","address":"alice@b.org"}]`), []string{"to[1]"}},
	}
	for _, tt := range tests {
		code, out := do(t, srv, "POST", "/v1/deliveries", key, tt.body)
		if code != 400 {
			t.Errorf("%s: status %d, want 400 (%v)", tt.name, code, out)
			continue
		}
		got := problems(out)
		for _, w := range tt.want {
			found := false
			for _, g := range got {
				if g == w {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no problem at %q; got %v", tt.name, w, got)
			}
		}
	}
	// Two different bad addresses are two problems, not also a duplicate.
	_, out := do(t, srv, "POST", "/v1/deliveries", key, request(`[{"channel":"email","address":"not one"},{"channel":"email","address":"nor this"}]`))
	if ps, _ := out["problems"].([]any); len(ps) != 2 || strings.Contains(fmt.Sprint(ps), "duplicate") {
		t.Errorf("two bad addresses: %v", ps)
	}
	all, _ := db.ListDeliveries(t.Context(), "", "", 100)
	if len(all) != 0 {
		t.Fatalf("bad requests stored %d deliveries", len(all))
	}
}

// A wrong member name is a problem at its path that says which member was
// meant, not a pathless "unknown field".
func TestUnknownFieldNamesPathAndMeaning(t *testing.T) {
	srv, _ := newTestServer(t)
	code, out := do(t, srv, "POST", "/v1/deliveries", key, request(`[{"type":"email","address":"a@b.org"}]`))
	ps, _ := out["problems"].([]any)
	if code != 400 || len(ps) != 1 {
		t.Fatalf("%d %v", code, out)
	}
	p := ps[0].(map[string]any)
	if p["path"] != "to[0].type" || p["reason"] != `unknown field; did you mean "channel"?` {
		t.Errorf("problem %v, want to[0].type: unknown field; did you mean \"channel\"?", p)
	}
	code, out = do(t, srv, "POST", "/v1/deliveries", key, `{"envelope": {}, "recipients": []}`)
	if ps, _ := out["problems"].([]any); code != 400 || len(ps) != 1 || ps[0].(map[string]any)["path"] != "recipients" ||
		ps[0].(map[string]any)["reason"] != `unknown field; did you mean "to"?` {
		t.Errorf("recipients: %d %v", code, out)
	}
}

func TestApprovalWithoutAgentNeedsOne(t *testing.T) {
	srv, _ := newTestServer(t)
	ap := `{"role":"agent","parts":[{"data":{"approvalId":"ap1","toolName":"book","toolCallId":"tc","args":{},"handler":"h","turn":"t","session":"s"},"metadata":{"partType":"approval-request"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"suspended"}}`
	code, out := do(t, srv, "POST", "/v1/deliveries", key, fmt.Sprintf(`{"envelope":%s,"to":[{"channel":"email","address":"a@b.org"}]}`, ap))
	if code != 400 || problems(out)[0] != "agent" {
		t.Fatalf("%d %v", code, out)
	}
	code, _ = do(t, srv, "POST", "/v1/deliveries", key, fmt.Sprintf(`{"envelope":%s,"to":[{"channel":"email","address":"a@b.org"}],"agent":"travel"}`, ap))
	if code != 202 {
		t.Fatalf("with agent: %d", code)
	}
}

func TestAuth(t *testing.T) {
	srv, _ := newTestServer(t)
	for _, auth := range []string{"", "wrong-key-wrong-key", key + "x"} {
		code, _ := do(t, srv, "POST", "/v1/deliveries", auth, request(`[{"channel":"email","address":"a@b.org"}]`))
		if code != 401 {
			t.Errorf("auth %q: %d, want 401", auth, code)
		}
		code, _ = do(t, srv, "GET", "/v1/deliveries", auth, "")
		if code != 401 {
			t.Errorf("GET with auth %q: %d, want 401", auth, code)
		}
	}
	if code, _ := do(t, srv, "GET", "/healthz", "", ""); code != 200 {
		t.Errorf("healthz %d", code)
	}
	if code, _ := do(t, srv, "GET", "/readyz", "", ""); code != 200 {
		t.Errorf("readyz %d", code)
	}
}

func TestIdempotencyKey(t *testing.T) {
	srv, db := newTestServer(t)
	body := request(`[{"channel":"email","address":"a@b.org"}]`)
	c1, o1 := do(t, srv, "POST", "/v1/deliveries", key, body, "Idempotency-Key", "abc")
	c2, o2 := do(t, srv, "POST", "/v1/deliveries", key, body, "Idempotency-Key", "abc")
	if c1 != 202 || c2 != 202 || fmt.Sprint(o1) != fmt.Sprint(o2) {
		t.Fatalf("replay: %d %v / %d %v", c1, o1, c2, o2)
	}
	c3, _ := do(t, srv, "POST", "/v1/deliveries", key, request(`[{"channel":"email","address":"other@b.org"}]`), "Idempotency-Key", "abc")
	if c3 != 409 {
		t.Fatalf("same key, other body: %d", c3)
	}
	all, _ := db.ListDeliveries(t.Context(), "", "", 100)
	if len(all) != 1 {
		t.Fatalf("%d deliveries stored", len(all))
	}
}

func TestTooLarge(t *testing.T) {
	srv, _ := newTestServer(t)
	big := request(`[{"channel":"email","address":"a@b.org"}]`)
	big = strings.Replace(big, "T12, T15, T18.", strings.Repeat("x", 10000), 1)
	code, out := do(t, srv, "POST", "/v1/deliveries", key, big)
	if code != 413 {
		t.Fatalf("%d %v", code, out)
	}
	// Under the body limit but over the envelope limit: also 413.
	mid := strings.Replace(request(`[{"channel":"email","address":"a@b.org"}]`), "T12, T15, T18.", strings.Repeat("x", 5000), 1)
	if code, out := do(t, srv, "POST", "/v1/deliveries", key, mid); code != 413 {
		t.Fatalf("envelope over its limit: %d %v", code, out)
	}
	// Both state the configured envelope limit (4096), not the body's
	// bound around it (8192).
	for _, body := range []string{big, mid} {
		if _, out := do(t, srv, "POST", "/v1/deliveries", key, body); out["error"] != "envelope larger than 4096 bytes" {
			t.Errorf("413 says %q; want the configured limit", out["error"])
		}
	}
}

// A body that is not JSON by its declared type is 415 (RFC 9110 §15.5.16),
// not 400; JSON with parameters, in any case, and a missing Content-Type
// are read.
func TestDeliveriesContentType(t *testing.T) {
	srv, _ := newTestServer(t)
	body := request(`[{"channel":"webhook","endpoint":"ops"}]`)
	for _, tt := range []struct {
		hdr  []string
		want int
	}{
		{nil, 202},
		{[]string{"Content-Type", "application/json"}, 202},
		{[]string{"Content-Type", "Application/JSON; charset=UTF-8"}, 202},
		{[]string{"Content-Type", "application/json ; charset=\"utf-8\""}, 202},
		{[]string{"Content-Type", "text/plain"}, 415},
		{[]string{"Content-Type", "application/x-www-form-urlencoded"}, 415},
		{[]string{"Content-Type", "application/jsonx"}, 415},
		{[]string{"Content-Type", "application/json; charset=latin1"}, 415},
		{[]string{"Content-Type", "application/json;;"}, 415},
		{[]string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, 415},
	} {
		code, out := do(t, srv, "POST", "/v1/deliveries", key, body, tt.hdr...)
		if code != tt.want {
			t.Errorf("%q: %d %v; want %d", tt.hdr, code, out, tt.want)
		}
		if code == 415 && !strings.Contains(fmt.Sprint(out["error"]), "application/json") {
			t.Errorf("%q: 415 without saying what is accepted: %v", tt.hdr, out)
		}
	}
}

func TestRetryAndNotFound(t *testing.T) {
	srv, db := newTestServer(t)
	_, out := do(t, srv, "POST", "/v1/deliveries", key, request(`[{"channel":"webhook","endpoint":"ops"}]`))
	id := out["deliveries"].([]any)[0].(map[string]any)["id"].(string)
	if code, _ := do(t, srv, "POST", "/v1/deliveries/"+id+"/retry", key, ""); code != 409 {
		t.Fatalf("retry of a queued delivery: %d", code)
	}
	jobs, _ := db.Claim(t.Context(), 1, 60e9, nil)
	db.Record(t.Context(), jobs[0].ID, jobs[0].LeaseUntil, store.Outcome{State: store.StateDead, DeadReason: "410"})
	if code, _ := do(t, srv, "POST", "/v1/deliveries/"+out["id"].(string)+"/retry", key, ""); code != 200 {
		t.Fatalf("retry dead by envelope id: %d", code)
	}
	if code, _ := do(t, srv, "GET", "/v1/deliveries/env_nope", key, ""); code != 404 {
		t.Fatalf("unknown id: %d", code)
	}
	if code, _ := do(t, srv, "GET", "/v1/deliveries?state=lost", key, ""); code != 400 {
		t.Fatalf("bad state: %d", code)
	}
}

func TestMetricsExposed(t *testing.T) {
	srv, _ := newTestServer(t)
	do(t, srv, "POST", "/v1/deliveries", key, request(`[{"channel":"email","address":"a@b.org"}]`))
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`beachd_ingested_deliveries_total{channel="email"} 1`, `beachd_queue_depth{state="queued"} 1`, "beachd_ingest_duration_seconds_count 1"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func FuzzAccept(f *testing.F) {
	f.Add([]byte(request(`[{"channel":"email","address":"a@b.org"}]`)))
	f.Add([]byte(`{"envelope":{"role":"agent","parts":[{"data":{"approvalId":"a"},"metadata":{"partType":"approval-request"}}],"meta":{}},"to":[{"channel":"sms","address":"+1"}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"envelope":{"role":"agent","parts":[{"text":"x","metdata":{}}]},"recipients":[{"type":"sms","Address":"+1","ädress":1}]}`))
	db := storetest.Open(f, bolt.Options{})
	ing := NewIngester(IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true, "sms": true}}, db, nil, nil, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, err := ing.Accept(t.Context(), b, "", "fuzz")
		if err == nil {
			return
		}
		var ve *envelope.ValidationError
		var tl *envelope.TooLargeError
		if !errors.As(err, &ve) && !errors.As(err, &tl) {
			t.Fatalf("bad input gave an untyped error (would be a 500): %v", err)
		}
	})
}

// A body of tiny list elements ({} costs 3 bytes of input and hundreds of
// bytes decoded) is refused once the list passes its decode bound, before
// the rest is built: 8 MB of input cannot become a gigabyte.
func TestHugeListsAreRefusedWhileDecoding(t *testing.T) {
	_, db := newTestServer(t)
	in := NewIngester(IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true}}, db, nil, nil, nil)
	for _, tt := range []struct{ body, want string }{
		{`{"to":[` + strings.Repeat(`{},`, 2_700_000) + `{}],"envelope":{}}`, "to: more than 10000 recipients"},
		{`{"to":[],"envelope":{"role":"agent","parts":[` + strings.Repeat(`{"metadata":{}},`, 500_000) + `{}],"meta":{}}}`, "parts: more than 10000 parts"},
	} {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		_, _, err := in.Accept(context.Background(), []byte(tt.body), "", "api")
		runtime.ReadMemStats(&m1)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%d-byte body: err = %v, want %q", len(tt.body), err, tt.want)
		}
		if mb := (m1.TotalAlloc - m0.TotalAlloc) >> 20; mb > 64 {
			t.Errorf("%d-byte body allocated %d MB while being refused", len(tt.body), mb)
		}
	}
}
