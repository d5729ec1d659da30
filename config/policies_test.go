package config

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/approvals/policy"
	"go.yaml.in/yaml/v3"
)

const policiesBase = `
api_keys: ["0123456789abcdef0123"]
agents:
  travel: { a2a_url: "http://127.0.0.1:9000/" }
email:
  from: "Travel agent <agent@example.org>"
  smtp: { host: smtp.example.org }
twilio:
  account_sid: AC00000000000000000000000000000000
  auth_token: t
  sms_from: "+15550001111"
`

func TestPoliciesParseAndCompile(t *testing.T) {
	raw := policiesBase + `approvals:
  policies:
    - name: small-bookings
      match: { agent: travel, tool: book_flight, when: "double(args.amount) <= 200.0 && args.currency == 'GBP'" }
      decide: granted
    - name: large-bookings
      match: { agent: travel, tool: book_flight }
      quorum: 2
      steps:
        - to:
            - { channel: sms, address: "+447700900456" }
            - { person: carol, channels: [ { channel: email, address: Carol@Example.ORG }, { channel: sms, address: "+447700900789" } ] }
    - name: two-of-three
      quorum: 2
      steps:
        - to: [ { channel: email, address: a@example.org }, { channel: email, address: b@example.org }, { channel: sms, address: "+447700900001" } ]
`
	cfg, _, err := CheckBytes([]byte(raw), "p.yaml", func(string) string { return "" }, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings = %q", cfg.Warnings)
	}
	set, err := cfg.Approvals.ParsePolicies(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 3 {
		t.Fatalf("%d policies", set.Len())
	}
	now := time.Now()
	if p := set.Match("travel", "book_flight", map[string]any{"amount": 120.0, "currency": "GBP"}, now); p == nil || p.Name != "small-bookings" || p.Decide != policy.DecideGranted {
		t.Errorf("small booking matched %+v", p)
	}
	large := set.Match("travel", "book_flight", map[string]any{"amount": 1200.0, "currency": "GBP"}, now)
	if large == nil || large.Name != "large-bookings" {
		t.Fatalf("large booking matched %+v", large)
	}
	st := large.Steps
	if len(st) != 1 || st[0].Envelope || len(st[0].People) != 2 || st[0].People[1].ID() != "carol" ||
		st[0].People[1].Channels[0].Address != "carol@example.org" || st[0].People[0].ID() != "+447700900456" || large.Quorum != 2 {
		t.Errorf("large-bookings = %+v", large.Definition)
	}
	// Not the part's handler: the agent given is the delivery's.
	if p := set.Match("other", "book_flight", map[string]any{"amount": 1.0, "currency": "GBP"}, now); p == nil || p.Name != "two-of-three" {
		t.Errorf("another agent's request matched %+v, want the catch-all two-of-three", p)
	}
}

func TestPoliciesCheckRefuses(t *testing.T) {
	raw := policiesBase + `approvals:
  policies:
    - name: expired
      decide: granted
    - name: OK Name
      match: { agent: nosuch, when: "args.amount <=\n 200 && nosuch" }
      decide: maybe
    - name: dup
      decide: granted
      quorum: 2
    - name: dup
      quorum: 3
      steps:
        - to: [ { channel: email, address: a@example.org }, { person: bob, channels: [ { channel: email, address: A@example.org } ] } ]
          remind_after: 2h
          escalate_after: 1h
        - to: [ { channel: sms, address: "not a number" }, { channel: webhook, endpoint: nope }, { channel: pigeon, address: x } ]
          escalate_after: 500ms
      quiet_hours: { zone: Mars/Olympus, from: "25:00", to: "08:00" }
    - name: operator
      steps:
        - to: everyone
`
	_, _, err := CheckBytes([]byte(raw), "bad.yaml", func(string) string { return "" }, false)
	if err == nil {
		t.Fatal("bad policies accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`line 14, column 13: approvals.policies[0].name: "expired" is reserved`,
		`approvals.policies[1].name: want a name of lower-case letters`,
		`approvals.policies[1].match.agent: unknown agent "nosuch"`,
		`approvals.policies[1].match.when: expression line 2, column 9: undeclared reference to 'nosuch'`,
		`approvals.policies[1].decide: must be granted or denied, got "maybe"`,
		`approvals.policies[2].decide: a policy that decides at ingest asks nobody`,
		`approvals.policies[3].name: duplicate policy name "dup"`,
		`approvals.policies[3].steps[0].to[1].channels[0]: A@example.org is already named at approvals.policies[3].steps[0].to[0]`,
		`approvals.policies[3].steps[0].remind_after: must be shorter than escalate_after (1h0m0s)`,
		`approvals.policies[3].steps[1].to[0]`,
		`approvals.policies[3].steps[1].to[1]: unknown webhook endpoint "nope"`,
		`approvals.policies[3].steps[1].to[2]: unknown channel`,
		`approvals.policies[3].steps[1].escalate_after: at least 1s (0: never), got 500ms`,
		`approvals.policies[3].quorum: 3, but the steps name 2 people`,
		`approvals.policies[3].quiet_hours.zone: unknown time zone "Mars/Olympus"`,
		`approvals.policies[3].quiet_hours.from: want a time of day such as 21:00, got "25:00"`,
		`approvals.policies[4].name: "operator" is reserved`,
		`approvals.policies[4].steps[0].to: want envelope or a list of recipients and people, got "everyone"`,
	} {
		if strings.Contains(msg, "policies[4].quorum") {
			t.Error("a step whose list was refused is also counted as naming nobody")
		}
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
}

func TestPolicyStepRecipientsNeedTheirChannel(t *testing.T) {
	raw := `
api_keys: ["0123456789abcdef0123"]
agents: { travel: { a2a_url: "http://127.0.0.1:9000/" } }
approvals:
  policies:
    - name: p
      steps:
        - to: [ { channel: email, address: a@example.org }, { channel: sms, address: "+447700900001" }, { channel: email, addres: typo@example.org } ]
`
	_, _, err := CheckBytes([]byte(raw), "c.yaml", func(string) string { return "" }, false)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"field addres not found in a step's recipient"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	raw = strings.Replace(raw, ", { channel: email, addres: typo@example.org }", "", 1)
	_, _, err = CheckBytes([]byte(raw), "c.yaml", func(string) string { return "" }, false)
	for _, want := range []string{"steps[0].to[0]: channel email: the email section is not configured", "steps[0].to[1]: channel sms: the twilio section is not configured"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// The ladder's keys are read and checked, and refused: this beachd has no
// durable timers to send reminders and escalations with, and a reminder
// that never goes out must not look configured.
func TestPolicyLadderParses(t *testing.T) {
	raw := policiesBase + `approvals:
  policies:
    - name: large-bookings
      match: { agent: travel, tool: book_flight }
      quorum: 2
      steps:
        - to: envelope
          remind_after: 30m
          escalate_after: 2h
        - to: [ { channel: sms, address: "+447700900456" } ]
          remind_after: 1h
      quiet_hours: { zone: Europe/London, from: "21:00", to: "08:00" }
`
	cfg, _, err := CheckBytes([]byte(raw), "l.yaml", func(string) string { return "" }, false)
	if err != nil {
		t.Fatal(err)
	}
	set, err := cfg.Approvals.ParsePolicies(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p := set.Policy("large-bookings")
	if p == nil || len(p.Steps) != 2 || !p.Steps[0].Envelope || p.Steps[0].RemindAfter != 30*time.Minute || p.Steps[0].EscalateAfter != 2*time.Hour ||
		p.Steps[1].RemindAfter != time.Hour || len(p.Steps[1].People) != 1 || p.QuietHours == nil || p.QuietHours.From != 21*60 || p.QuietHours.To != 8*60 {
		t.Fatalf("ladder parsed as %+v", p)
	}
}

// A later step is asked only by the escalation of the step before it, and
// the request's own recipients only at once.
func TestPolicyLadderChecks(t *testing.T) {
	raw := policiesBase + `approvals:
  policies:
    - name: ladder
      steps:
        - to: [ { channel: email, address: a@example.org } ]
          remind_after: 2h
          escalate_after: 1h
        - to: envelope
        - to: [ { channel: sms, address: "+447700900456" } ]
`
	_, _, err := CheckBytes([]byte(raw), "l.yaml", func(string) string { return "" }, false)
	if err == nil {
		t.Fatal("a ladder with unreachable steps was accepted")
	}
	for _, want := range []string{
		"approvals.policies[0].steps[0].remind_after: must be shorter than escalate_after",
		"approvals.policies[0].steps[1].to: envelope (the request's own recipients) can only be the first step",
		"approvals.policies[0].steps[1].escalate_after: required: steps[2] is asked only when this step escalates",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no %q in:\n%v", want, err)
		}
	}
}

// Warnings are placed in the file as problems are, in the file's order.
func TestWarningsPlaced(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte("a:\n  b: 1\nc: 2\n"), &root); err != nil {
		t.Fatal(err)
	}
	v := &validator{}
	v.warnf("c", "late")
	v.warnf("a.b", "early")
	v.warnf("missing", "nowhere")
	got := placeWarnings(&root, v.warnings)
	want := []string{"line 2, column 6: a.b: early", "line 3, column 4: c: late", "missing: nowhere"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("placeWarnings = %q, want %q", got, want)
	}
}
