package config

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Several keys on one line (flow maps) must not blur which key an error is
// about: each error names the full path of its own key, and its line and
// column in the file as written.
func TestConfigErrorsInFlowMapsNameTheirKey(t *testing.T) {
	const keys = "api_keys: [\"0123456789abcdef\"]\n"
	tests := []struct {
		name, yaml string
		want       []string // each must appear in the error
		notWant    []string // none may appear
	}{
		{"type error in the second key of a one-line map",
			keys + "webhooks: {endpoints: {a: {url: \"https://x.org/\", timeout: soon, max_concurrency: 3}}}\n",
			[]string{"line 2, column 60: webhooks.endpoints.a.timeout: want a duration such as 30s, 5m or 24h, got \"soon\""},
			[]string{"max_concurrency:", "webhooks.endpoints.a.url:"}},
		{"unknown key in the first of two endpoints on one line",
			keys + "webhooks: {endpoints: {a: {url: \"https://x.org/\", sekret: y}, bb: {url: \"https://y.org/\", secret: s}}}\n",
			[]string{"line 2, column 51: webhooks.endpoints.a.sekret: is not a known key"},
			[]string{"endpoints.bb"}},
		{"two errors on one line each name their own key",
			keys + "agents: {x: {timeout: soon}, y: {timeout: later}}\n",
			[]string{"line 2, column 23: agents.x.timeout:", "line 2, column 43: agents.y.timeout:"}, nil},
		{"a map where a string belongs names the key, not a key inside the map",
			keys + "listen: {host: a, port: 1}\n",
			[]string{"line 2, column 9: listen: want a single value (text), got a map"}, []string{"listen.host", "listen.port"}},
		{"sequence item in a flow list",
			keys + "schedules: [{name: a, cron: '@daily', agent: x, message: m, to: []}, {name: b, retries: many}]\n",
			[]string{"line 2, column 89: schedules[1].retries: want a whole number, got \"many\""}, []string{"schedules[0]"}},
		{"env-expanded value keeps the position as written",
			keys + "dispatch: {workers: \"${W}\", nope: 1}\n",
			[]string{"line 2, column 21: dispatch.workers: want a whole number, got \"4\"", "line 2, column 29: dispatch.nope:"}, nil},
		{"duplicate key",
			keys + "log: {format: text, format: json}\n",
			[]string{"line 2, column 21: log.format:", "already"}, nil},
		{"unknown top-level key names its known neighbours",
			keys + "listen_addr: x\n",
			[]string{"line 2, column 1: listen_addr: is not a known key", "listen"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yaml", env(map[string]string{"W": "4"}))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error names %q:\n%v", w, err)
				}
			}
		})
	}
}

// The walk that names problems must judge a document as yaml's decoder
// does: a problem wherever yaml finds one, none where yaml finds none.
func FuzzConfigErrorPaths(f *testing.F) {
	if raw, err := os.ReadFile("../beachd.example.yaml"); err == nil {
		f.Add(raw)
	}
	for _, s := range []string{
		"webhooks: {endpoints: {a: {url: x, timeout: soon, max_concurrency: 3}}}\n",
		"d: &d {timeout: soon}\nagents: {a: *d, b: {<<: *d, timeout: 1s, z: 1}}\n",
		"log: {format: text, format: json}\n",
		"schedules: [{name: b, retries: many, to: [{channel: email, address: a, x: 1}]}]\n",
		"&0000000: #a null key, which yaml skips\n~: 1\n",
		"email: 5\nlisten: [1]\nretention: 1h\ntwilio: {whatsapp_templates: {approval: {variables: {a: [1]}}}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		var root yaml.Node
		if yaml.Unmarshal(b, &root) != nil {
			return
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		var cfg Config
		err := dec.Decode(&cfg)
		w := &nodeWalker{budget: 1 << 20}
		w.walk(&root, reflect.TypeFor[Config](), "")
		var te *yaml.TypeError
		switch {
		case errors.As(err, &te) && len(w.problems) == 0:
			t.Fatalf("yaml: %v\nthe walk found nothing", err)
		case err == nil && len(w.problems) > 0:
			t.Fatalf("yaml accepts it; the walk found %q", w.problems)
		}
	})
}
