package config

import (
	"strings"
	"testing"
	"time"
)

const testWhsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestWebhookConfigParsesRotationAndDurations(t *testing.T) {
	raw := `
api_keys: ["0123456789abcdef0123"]
webhooks:
  endpoints:
    ops:
      url: https://ops.example.org/hook
      secrets: ["${NEW_SECRET}", "` + testWhsec + `"]
      consumes: [llm-context]
      timeout: 20s
      max_concurrency: 4
      headers: { X-Tenant: acme }
    local:
      url: http://127.0.0.1:9999/hook
      secret: "` + testWhsec + `"
`
	env := map[string]string{"NEW_SECRET": "whsec_QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI="}
	cfg, err := Parse([]byte(raw), "test.yaml", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	ops := cfg.Webhooks.Endpoints["ops"]
	if len(ops.SecretList()) != 2 || ops.SecretList()[0] != env["NEW_SECRET"] || ops.Timeout != 20*time.Second ||
		ops.MaxConcurrency != 4 || ops.Headers["X-Tenant"] != "acme" {
		t.Errorf("ops = %+v", ops)
	}
	if l := cfg.Webhooks.Endpoints["local"].SecretList(); len(l) != 1 || l[0] != testWhsec {
		t.Errorf("local secrets %v", l)
	}
}

func TestWebhookConfigProblems(t *testing.T) {
	tests := []struct {
		name string
		ep   EndpointConfig
		key  string
	}{
		{"missing url", EndpointConfig{Secret: testWhsec}, "webhooks.endpoints.ops.url: required"},
		{"relative url", EndpointConfig{URL: "/hook", Secret: testWhsec}, "webhooks.endpoints.ops.url: must be an absolute"},
		{"http to a remote host", EndpointConfig{URL: "http://ops.example.org/hook", Secret: testWhsec}, "webhooks.endpoints.ops.url: must be https"},
		{"credentials in url", EndpointConfig{URL: "https://u:p@ops.example.org/hook", Secret: testWhsec}, "webhooks.endpoints.ops.url: must not carry credentials"},
		{"no secret", EndpointConfig{URL: "https://x.org/h"}, "webhooks.endpoints.ops.secret: required"},
		{"both secret and secrets", EndpointConfig{URL: "https://x.org/h", Secret: testWhsec, Secrets: []string{testWhsec}}, "webhooks.endpoints.ops: set secret or secrets"},
		{"secret without prefix", EndpointConfig{URL: "https://x.org/h", Secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "webhooks.endpoints.ops.secret: invalid webhook secret"},
		{"short secret in list", EndpointConfig{URL: "https://x.org/h", Secrets: []string{testWhsec, "whsec_AAAA"}}, "webhooks.endpoints.ops.secrets[1]: invalid webhook secret"},
		{"negative timeout", EndpointConfig{URL: "https://x.org/h", Secret: testWhsec, Timeout: -time.Second}, "webhooks.endpoints.ops.timeout"},
		{"huge timeout", EndpointConfig{URL: "https://x.org/h", Secret: testWhsec, Timeout: time.Hour}, "webhooks.endpoints.ops.timeout"},
		{"negative concurrency", EndpointConfig{URL: "https://x.org/h", Secret: testWhsec, MaxConcurrency: -1}, "webhooks.endpoints.ops.max_concurrency"},
		{"reserved header", EndpointConfig{URL: "https://x.org/h", Secret: testWhsec, Headers: map[string]string{"Webhook-Signature": "x"}}, "webhooks.endpoints.ops.headers.Webhook-Signature: is set by beachd"},
		{"header injection", EndpointConfig{URL: "https://x.org/h", Secret: testWhsec, Headers: map[string]string{"X-A": "a\r\nX-B: b"}}, "webhooks.endpoints.ops.headers.X-A: value must not contain line breaks"},
		{"bad header name", EndpointConfig{URL: "https://x.org/h", Secret: testWhsec, Headers: map[string]string{"X A": "a"}}, "webhooks.endpoints.ops.headers.X A: not a valid header name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := WebhooksConfig{Endpoints: map[string]EndpointConfig{"ops": tt.ep}}
			v := &validator{}
			c.validate(v)
			if !strings.Contains(strings.Join(v.problems, "\n"), tt.key) {
				t.Fatalf("problems %q, want one containing %q", v.problems, tt.key)
			}
		})
	}
	// Loopback hosts may use plain http.
	for _, u := range []string{"http://127.0.0.1:8025/dev/sink", "http://localhost/h", "http://[::1]:80/h"} {
		v := &validator{}
		(&WebhooksConfig{Endpoints: map[string]EndpointConfig{"ops": {URL: u, Secret: testWhsec}}}).validate(v)
		if len(v.problems) > 0 {
			t.Errorf("%s refused: %v", u, v.problems)
		}
	}
	v := &validator{}
	(&WebhooksConfig{Endpoints: map[string]EndpointConfig{"bad name/x": {URL: "https://x.org/h", Secret: testWhsec}}}).validate(v)
	if len(v.problems) != 1 || !strings.Contains(v.problems[0], "endpoint names") {
		t.Errorf("bad endpoint name: %v", v.problems)
	}
}
