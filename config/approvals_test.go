package config

import (
	"strings"
	"testing"
	"time"
)

func TestApprovalsConfigParsesAndValidates(t *testing.T) {
	raw := `
api_keys: ["0123456789abcdef0123"]
agents:
  travel: { a2a_url: "http://127.0.0.1:9000/", headers: { Authorization: "Bearer ${AGENT_TOKEN}" }, timeout: 20s }
  hooked: { injector: webhook, webhook_url: "https://agent.example.org/approvals", webhook_secret: "` + testWhsec + `" }
approvals:
  default_expiry: 2h
  secret: "${APPROVAL_SECRET}"
  sms_code_digits: 8
  max_wrong_codes: 3
  injection_lifetime: 48h
`
	env := map[string]string{"AGENT_TOKEN": "tok", "APPROVAL_SECRET": strings.Repeat("x", 40)}
	cfg, err := Parse([]byte(raw), "test.yaml", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	a := cfg.Approvals
	if a.DefaultExpiry != 2*time.Hour || a.Secret != env["APPROVAL_SECRET"] || a.SMSCodeDigits != 8 || a.MaxWrongCodes != 3 || a.InjectionLifetime != 48*time.Hour {
		t.Errorf("approvals = %+v", a)
	}
	if tr := cfg.Agents["travel"]; tr.Headers["Authorization"] != "Bearer tok" || tr.Timeout != 20*time.Second {
		t.Errorf("travel = %+v", tr)
	}

	bad := `
api_keys: ["0123456789abcdef0123"]
agents:
  nourl: { timeout: 5s }
  badinj: { a2a_url: "http://x/", injector: smoke }
  hook: { injector: webhook }
  rel: { a2a_url: "/relative" }
approvals:
  default_expiry: 5s
  secret: short
  sms_code_digits: 3
  max_wrong_codes: -1
`
	cfg, err = Parse([]byte(bad), "bad.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, key := range []string{"agents.nourl.a2a_url", "agents.badinj.injector", "agents.hook.webhook_url", "agents.hook.webhook_secret",
		"agents.rel.a2a_url", "approvals.default_expiry", "approvals.secret", "approvals.sms_code_digits", "approvals.max_wrong_codes"} {
		if !strings.Contains(err.Error(), key+":") {
			t.Errorf("no problem named %s in:\n%v", key, err)
		}
	}
}

// approvals.email_links and approvals.words: parsed, wired, and their
// mistakes named by key.
func TestApprovalsLinksAndWordsConfig(t *testing.T) {
	raw := `
api_keys: ["0123456789abcdef0123"]
approvals:
  email_links: false
  words: {granted: [ja, Oui], denied: [nein]}
`
	cfg, err := Parse([]byte(raw), "test.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	if a := cfg.Approvals; a.EmailLinks == nil || *a.EmailLinks {
		t.Errorf("email_links = %v", a.EmailLinks)
	}
	w, err := cfg.Approvals.ParseWords()
	if err != nil {
		t.Fatal(err)
	}
	if d, _, ok := w.Parse("OUI merci"); !ok || d != "granted" {
		t.Errorf("oui: %q %v", d, ok)
	}

	bad := `
api_keys: ["0123456789abcdef0123"]
approvals: {words: {granted: [ja, "nur ja"], denied: [yes, stop]}}
`
	cfg, err = Parse([]byte(bad), "bad.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Validate()
	if err == nil {
		t.Fatal("bad words accepted")
	}
	for _, want := range []string{`approvals.words.granted[1]: "nur ja" is not one word`,
		`approvals.words.denied[0]: "yes" already means the opposite decision`,
		`approvals.words.denied[1]: "stop" is a carrier opt-out word`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// Without links, replies are the only way to answer a mail: a mail
// channel without IMAP cannot be answered at all.
func TestEmailLinksOffNeedsIMAP(t *testing.T) {
	raw := `
api_keys: ["0123456789abcdef0123"]
email: {from: "a@example.org", smtp: {host: 127.0.0.1, port: 2525, tls: none}}
approvals: {email_links: false}
`
	cfg, err := Parse([]byte(raw), "test.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "approvals.email_links") || !strings.Contains(err.Error(), "email.imap") {
		t.Fatalf("err = %v", err)
	}
}
