package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
)

// With MetricsRequireKey, /metrics answers 401 without the bearer key and
// serves the series with it; without it, Prometheus scrapes keyless.
func TestMetricsRequireKey(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	for _, require := range []bool{true, false} {
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg, db)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{APIKeys: []string{key}, MetricsRequireKey: require}, db, nil, m, reg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s)
		get := func(auth string) int {
			req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		want := map[bool]int{true: 401, false: 200}[require]
		if got := get(""); got != want {
			t.Errorf("require_key %v: /metrics without a key: %d, want %d", require, got, want)
		}
		if got := get("wrong-key-00000000"); got != want {
			t.Errorf("require_key %v: /metrics with a wrong key: %d, want %d", require, got, want)
		}
		if got := get(key); got != 200 {
			t.Errorf("require_key %v: /metrics with the key: %d", require, got)
		}
		srv.Close()
	}
}
