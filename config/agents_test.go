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
    approvers: ["Alice <alice@Example.ORG>", "+447700900123", "webhook:ops"]
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
	if _, ok := sets["open"]; ok || len(sets["travel"]) != 3 {
		t.Fatalf("approver sets %v", sets)
	}
	for _, r := range []envelope.Recipient{{Channel: "email", Address: "alice@example.org"}, {Channel: "sms", Address: "+447700900123"},
		{Channel: "whatsapp", Address: "+447700900123"}, {Channel: "webhook", Endpoint: "ops"}} {
		if !sets["travel"][api.ApproverKey(r)] {
			t.Errorf("%+v is not an approver of travel", r)
		}
	}

	bad := `
api_keys: ["0123456789abcdef0123"]
agents:
  travel:
    a2a_url: "http://127.0.0.1:9000/"
    approvers: ["alice", "+44 7700", "webhook:nowhere", "webhook:", "bob@"]
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
		"agents.travel.approvers[3]", "agents.travel.approvers[4]", "agents.none.approvers: empty"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("no problem %q in:\n%v", key, err)
		}
	}
}
