package config

import (
	"strings"
	"testing"
	"time"
)

func TestEmailConfig(t *testing.T) {
	base := `
api_keys: [kkkkkkkkkkkkkkkkkkkk]
email:
  from: "Travel agent <agent@example.org>"
  reply_domain: reply.example.org
  authserv_id: mx.example.org
  lifetime: 48h
  smtp: { host: smtp.example.org, port: 587, username: agent, password: "${SMTP_PASSWORD}", tls: starttls, timeout: 20s, pool_size: 3 }
  imap: { host: imap.example.org, username: agent, password: x, mailbox: INBOX, processed: Processed, poll_interval: 2m }
`
	getenv := func(k string) string {
		if k == "SMTP_PASSWORD" {
			return "pw"
		}
		return ""
	}
	cfg, err := Parse([]byte(base), "t.yaml", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e := cfg.Email
	if e.SMTP.Password != "pw" || e.Lifetime != 48*time.Hour || e.SMTP.Timeout != 20*time.Second || e.IMAP.PollInterval != 2*time.Minute {
		t.Fatalf("parsed %+v %+v", e, e.IMAP)
	}
	if e.ReplyTo() != "agent@reply.example.org" || e.FromAddress() != "agent@example.org" {
		t.Fatalf("reply-to %q from %q", e.ReplyTo(), e.FromAddress())
	}

	for _, tc := range []struct{ yaml, key string }{
		{`email: { from: "x", smtp: { host: smtp.example.org } }`, "email.from"},
		{`email: { from: a@b.org, smtp: { host: smtp.example.org, tls: none } }`, "email.smtp.tls"},
		{`email: { from: a@b.org, smtp: { host: smtp.example.org, tls: ssl } }`, "email.smtp.tls"},
		{`email: { from: a@b.org, smtp: { port: 70000 } }`, "email.smtp.host"},
		{`email: { from: a@b.org, smtp: { host: h.org, port: 70000 } }`, "email.smtp.port"},
		{`email: { from: a@b.org, reply_local: "a+b", smtp: { host: h.org } }`, "email.reply_local"},
		{`email: { from: a@b.org, smtp: { host: h.org, dkim: { domain: b.org } } }`, "email.smtp.dkim.selector"},
		{`email: { from: a@b.org, smtp: { host: h.org }, imap: { host: imap.b.org } }`, "email.imap.username"},
		{`email: { from: a@b.org, smtp: { host: h.org }, imap: { host: imap.b.org, username: u, tls: none } }`, "email.imap.tls"},
		{`email: { from: a@b.org, smtp: { host: h.org }, imap: { host: i.org, username: u, mailbox: X, processed: X } }`, "email.imap.processed"},
		// Replies decide approvals: their senders must be verifiable.
		{`email: { from: a@b.org, smtp: { host: h.org }, imap: { host: i.org, username: u } }`, "email.authserv_id"},
		{`email: { from: a@b.org, authserv_id: "mx.b.org; dkim=pass", smtp: { host: h.org }, imap: { host: i.org, username: u } }`, "email.authserv_id"},
		{`email: { from: a@b.org, authserv_id: mx.b.org, trust_unauthenticated: true, smtp: { host: h.org }, imap: { host: i.org, username: u } }`, "email.trust_unauthenticated"},
	} {
		cfg, err := Parse([]byte("api_keys: [kkkkkkkkkkkkkkkkkkkk]\n"+tc.yaml), "t.yaml", getenv)
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		_, err = cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("%s: err %v, want a problem at %s", tc.yaml, err, tc.key)
		}
	}
	// Without imap no reply is read, so no authserv-id is needed; with it,
	// the explicit opt-out is accepted.
	for _, y := range []string{
		`email: { from: a@b.org, smtp: { host: h.org } }`,
		`email: { from: a@b.org, trust_unauthenticated: true, smtp: { host: h.org }, imap: { host: i.org, username: u } }`,
	} {
		cfg, _ := Parse([]byte("api_keys: [kkkkkkkkkkkkkkkkkkkk]\n"+y), "t.yaml", getenv)
		if _, err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
	// none is fine on loopback.
	cfg, _ = Parse([]byte("api_keys: [kkkkkkkkkkkkkkkkkkkk]\nemail: { from: a@b.org, smtp: { host: 127.0.0.1, port: 2525, tls: none } }"), "t.yaml", getenv)
	if _, err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(`email: { from: a@b.org, smtp: { host: h.org, bogus: 1 } }`), "t.yaml", getenv); err == nil {
		t.Error("unknown key accepted")
	}
}

func TestDKIMAlignmentKey(t *testing.T) {
	for _, tc := range []struct{ value, problem string }{{"", ""}, {"relaxed", ""}, {"strict", ""}, {"loose", "email.dkim_alignment: must be relaxed or strict"}} {
		raw := `
api_keys: ["0123456789abcdef0123"]
email:
  from: agent@example.org
  authserv_id: mx.example.org
  dkim_alignment: "` + tc.value + `"
  smtp: { host: smtp.example.org, port: 587 }
`
		cfg, err := Parse([]byte(raw), "test.yaml", func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		_, err = cfg.Validate()
		switch {
		case tc.problem == "" && err != nil:
			t.Errorf("dkim_alignment %q refused: %v", tc.value, err)
		case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
			t.Errorf("dkim_alignment %q: %v, want %q", tc.value, err, tc.problem)
		}
	}
}
