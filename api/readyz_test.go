package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
)

// /readyz tells anyone whether the process is ready; its host name, pid,
// singletons (a mailbox account among them) and what is still starting are
// for callers with a key.
func TestReadyzDetailsNeedAKey(t *testing.T) {
	const readKey = "read-only-key-0123456789"
	for _, ready := range []bool{true, false} {
		db := storetest.Open(t, bolt.Options{})
		ing := NewIngester(IngestConfig{Registry: envelope.NewRegistry()}, db, nil, nil, nil)
		s, err := New(Config{APIKeys: []string{key}, ReadKeys: []string{readKey},
			Ready: func() error {
				if ready {
					return nil
				}
				return errors.New("starting: imap:agent@mail.example.org/INBOX")
			},
			ReadyDetails: func() map[string]any {
				return map[string]any{"holder": "host-7.example.internal/4711", "singletons": []string{"imap:agent@mail.example.org/INBOX"}}
			}}, db, ing, nil, prometheus.NewRegistry(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s)
		defer srv.Close()
		want := 200
		if !ready {
			want = 503
		}
		for _, auth := range []string{"", "wrong-key-wrong-key", key, readKey} {
			req, _ := http.NewRequest("GET", srv.URL+"/readyz", nil)
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != want {
				t.Fatalf("ready=%v auth %q: %d %v %v", ready, auth, resp.StatusCode, body, err)
			}
			raw, _ := json.Marshal(body)
			leaks := strings.Contains(string(raw), "host-7") || strings.Contains(string(raw), "agent@mail")
			keyed := auth == key || auth == readKey
			if leaks != keyed {
				t.Errorf("ready=%v auth %q: %s (details shown: %v, want %v)", ready, auth, raw, leaks, keyed)
			}
			if body["status"] == nil {
				t.Errorf("ready=%v auth %q: no status in %s", ready, auth, raw)
			}
		}
	}
}
