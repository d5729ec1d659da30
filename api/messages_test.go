package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

func TestMessageLinks(t *testing.T) {
	l := NewMessageLinks([]byte("0123456789abcdef0123456789abcdef"), "https://beachd.example/")
	u := l.URL("dlv_1")
	if !strings.HasPrefix(u, "https://beachd.example/m/dlv_1.") {
		t.Fatalf("URL = %s", u)
	}
	ref := strings.TrimPrefix(u, "https://beachd.example/m/")
	if id, ok := l.Check(ref); !ok || id != "dlv_1" {
		t.Fatalf("Check(%s) = %q %v", ref, id, ok)
	}
	other := NewMessageLinks([]byte("another secret, another key!!!!!"), "https://beachd.example")
	for _, bad := range []string{"", ".", "dlv_1", "dlv_1.", ".abc", "dlv_2" + ref[5:], ref + "x", ref[:len(ref)-1],
		strings.TrimPrefix(other.URL("dlv_1"), "https://beachd.example/m/"), strings.Repeat("a", 200) + ref} {
		if id, ok := l.Check(bad); ok {
			t.Errorf("Check(%q) accepted, id %q", bad, id)
		}
	}
}

func FuzzMessageRef(f *testing.F) {
	l := NewMessageLinks([]byte("0123456789abcdef0123456789abcdef"), "http://x")
	good := strings.TrimPrefix(l.URL("dlv_abc"), "http://x/m/")
	f.Add(good)
	f.Add("dlv_abc.")
	f.Add("")
	f.Fuzz(func(t *testing.T, ref string) {
		id, ok := l.Check(ref)
		if ok && ref != good && strings.TrimPrefix(l.URL(id), "http://x/m/") != ref {
			t.Fatalf("Check accepted %q (id %q) that the key did not mint", ref, id)
		}
	})
}

func TestMessagePage(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	res, err := db.Ingest(context.Background(), store.Ingest{
		Envelope:   []byte(`{"role":"agent","parts":[{"text":"<b>all</b> of it","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-01-01T00:00:00Z","finalizedBy":"complete"}}`),
		Deliveries: []store.NewDelivery{{Channel: "sms", To: "+15555550100"}}})
	if err != nil {
		t.Fatal(err)
	}
	links := NewMessageLinks([]byte("0123456789abcdef0123456789abcdef"), "http://x")
	page := &MessagePage{Links: links, DB: db, Render: func(env *envelope.Envelope, d *store.Delivery) (string, error) {
		return "<html><body>" + env.Text(envelope.PartResponse) + " for " + d.To + "</body></html>", nil
	}}
	mux := http.NewServeMux()
	mux.Handle("GET /m/{ref}", page)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(method, ref string) (int, http.Header, string) {
		req, _ := http.NewRequest(method, srv.URL+"/m/"+ref, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	ref := strings.TrimPrefix(links.URL(res.Deliveries[0].ID), "http://x/m/")
	code, h, body := get("GET", ref)
	if code != 200 || !strings.Contains(body, "<b>all</b> of it for +15555550100") {
		t.Fatalf("page: %d %s", code, body)
	}
	for k, want := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
		"X-Content-Type-Options": "nosniff", "Content-Type": "text/html; charset=utf-8"} {
		if h.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, h.Get(k), want)
		}
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script") {
		t.Errorf("CSP = %q", csp)
	}
	if code, _, body := get("HEAD", ref); code != 200 || body != "" {
		t.Errorf("HEAD: %d %q", code, body)
	}
	if code, _, body := get("GET", ref[:len(ref)-2]+"zz"); code != 404 || strings.Contains(body, "all") {
		t.Errorf("bad MAC: %d %s", code, body)
	}
	// A well-signed link to a delivery that is gone (retention) says so.
	gone := strings.TrimPrefix(links.URL("dlv_pruned"), "http://x/m/")
	if code, _, body := get("GET", gone); code != 410 || !strings.Contains(body, "no longer available") {
		t.Errorf("pruned: %d %s", code, body)
	}
}
