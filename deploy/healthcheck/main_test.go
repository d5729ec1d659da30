package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer healthy.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "stopping", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	// A port nothing listens on: bind one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/healthz"
	ln.Close()

	noEnv := func(string) string { return "" }
	cases := []struct {
		name   string
		args   []string
		getenv func(string) string
		want   int
		stderr string
	}{
		{"healthy", []string{healthy.URL + "/healthz"}, noEnv, 0, ""},
		{"from the environment", nil, func(k string) string {
			if k == "BEACHD_HEALTHCHECK_URL" {
				return healthy.URL + "/healthz"
			}
			return ""
		}, 0, ""},
		{"not 200", []string{failing.URL + "/healthz"}, noEnv, 1, "503"},
		{"wrong path", []string{healthy.URL + "/nope"}, noEnv, 1, "404"},
		{"nobody listening", []string{closed}, noEnv, 1, "connect"},
		{"bad URL", []string{"http://[::1"}, noEnv, 2, "beachd-healthcheck"},
		{"too many arguments", []string{"a", "b"}, noEnv, 2, "usage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := run(context.Background(), c.args, c.getenv, &stderr); got != c.want {
				t.Fatalf("exit %d, want %d (stderr %q)", got, c.want, stderr.String())
			}
			if c.stderr != "" && !strings.Contains(stderr.String(), c.stderr) {
				t.Fatalf("stderr %q does not mention %q", stderr.String(), c.stderr)
			}
		})
	}
}
