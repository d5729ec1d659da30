package config

import (
	"strings"
	"testing"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
)

func TestAgentApproversConfig(t *testing.T) {
	raw := `
api_keys: ["0123456789abcdef0123"]
webhooks:
  endpoints:
    ops: { url: "https://ops.example.org/hook", secrets: ["` + testWhsec + `"] }
agents:
  travel:
    a2a_url: "http://127.0.0.1:9000/"
    approvers: ["Alice <alice@Example.ORG>", "+447700900123", "webhook:ops", "slack:U012AB3CD", "slack:C0123ABCD"]
  open: { a2a_url: "http://127.0.0.1:9001/" }
`
	cfg, err := Parse([]byte(raw), "test.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	sets := cfg.ApproverSets()
	if _, ok := sets["open"]; ok || len(sets["travel"]) != 5 {
		t.Fatalf("approver sets %v", sets)
	}
	for _, r := range []envelope.Recipient{{Channel: "email", Address: "alice@example.org"}, {Channel: "sms", Address: "+447700900123"},
		{Channel: "whatsapp", Address: "+447700900123"}, {Channel: "webhook", Endpoint: "ops"},
		{Channel: "slack", Address: "U012AB3CD"}, {Channel: "slack", Address: "C0123ABCD"}, {Channel: "slack", Address: "Alice@example.org"}} {
		if !sets["travel"][api.ApproverKey(r)] {
			t.Errorf("%+v is not an approver of travel", r)
		}
	}

	bad := `
api_keys: ["0123456789abcdef0123"]
agents:
  travel:
    a2a_url: "http://127.0.0.1:9000/"
    approvers: ["alice", "+44 7700", "webhook:nowhere", "webhook:", "bob@", "slack:alice"]
  none: { a2a_url: "http://127.0.0.1:9001/", approvers: [] }
`
	cfg, err = Parse([]byte(bad), "bad.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Validate()
	if err == nil {
		t.Fatal("bad approvers accepted")
	}
	for _, key := range []string{"agents.travel.approvers[0]", "agents.travel.approvers[1]", "agents.travel.approvers[2]: unknown webhook endpoint",
		"agents.travel.approvers[3]", "agents.travel.approvers[4]", "agents.travel.approvers[5]: \"slack:alice\"", "agents.none.approvers: empty"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("no problem %q in:\n%v", key, err)
		}
	}
}

func TestAgentA2ABinding(t *testing.T) {
	check := func(version, binding string) error {
		raw := `
api_keys: ["0123456789abcdef0123"]
agents:
  travel: { a2a_url: "http://127.0.0.1:9000/", a2a_version: "` + version + `", a2a_binding: "` + binding + `" }
`
		cfg, err := Parse([]byte(raw), "test.yaml", func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		_, err = cfg.Validate()
		return err
	}
	for _, ok := range [][2]string{{"", ""}, {"auto", "auto"}, {"1.0", "http+json"}, {"1.0", "jsonrpc"}, {"auto", "http+json"}, {"0.3", "jsonrpc"}} {
		if err := check(ok[0], ok[1]); err != nil {
			t.Errorf("a2a_version %q, a2a_binding %q refused: %v", ok[0], ok[1], err)
		}
	}
	for _, bad := range [][3]string{{"1.0", "grpc", "must be auto, jsonrpc or http+json"}, {"0.3", "http+json", "A2A 1.0 binding"}} {
		err := check(bad[0], bad[1])
		if err == nil || !strings.Contains(err.Error(), "agents.travel.a2a_binding") || !strings.Contains(err.Error(), bad[2]) {
			t.Errorf("a2a_version %q, a2a_binding %q: %v", bad[0], bad[1], err)
		}
	}
}
