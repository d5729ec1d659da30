package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// inboundBase is a configuration whose channels receive the inbound
// addresses of the tests: mail read over IMAP, SMS from +15550001111,
// WhatsApp from +15550002222.
const inboundBase = `api_keys: ["0123456789abcdef0123"]
email:
  from: "Travel agent <agent@example.org>"
  reply_domain: reply.example.org
  authserv_id: mx.example.org
  smtp: { host: smtp.example.org }
  imap: { host: imap.example.org, username: agent }
twilio:
  account_sid: AC00000000000000000000000000000000
  auth_token: t
  sms_from: "+15550001111"
  whatsapp_from: "whatsapp:+15550002222"
`

// checkInboundYAML runs the check of `beachd config check` on inboundBase
// followed by extra.
func checkInboundYAML(t *testing.T, extra string) (*Config, error) {
	t.Helper()
	cfg, _, err := CheckBytes([]byte(inboundBase+extra), "t.yaml", env(nil), false)
	return cfg, err
}

func TestInboundConfigParsed(t *testing.T) {
	cfg, err := checkInboundYAML(t, `agents:
  travel:
    a2a_url: http://127.0.0.1:9000/
    inbound:
      email: ["Travel@Example.ORG", " desk@example.org "]
      sms: ["+15550001111"]
      whatsapp: ["whatsapp:+15550002222"]
      allow: ["*@Example.org", "+44*", "Alice@Gmail.COM", "+447700900123", "*"]
      idle_timeout: 2h
      max_turns: { per_minute: 3, per_hour: 30 }
      refuse_unknown: false
  quiet:
    a2a_url: http://127.0.0.1:9001/
    inbound: { email: [help@example.org] }
  plain: { a2a_url: http://127.0.0.1:9002/ }
`)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.InboundAgents()
	want := map[string]Inbound{
		"travel": {
			Email: []string{"travel@example.org", "desk@example.org"}, SMS: []string{"+15550001111"}, WhatsApp: []string{"+15550002222"},
			Allow:       []string{"*@example.org", "+44*", "alice@gmail.com", "+447700900123", "*"},
			IdleTimeout: 2 * time.Hour, PerMinute: 3, PerHour: 30, RefuseUnknown: false,
		},
		// The defaults; nobody may write (an empty allow list denies all).
		"quiet": {Email: []string{"help@example.org"}, IdleTimeout: 24 * time.Hour, PerMinute: 10, PerHour: 100, RefuseUnknown: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inbound agents\n got %+v\nwant %+v", got, want)
	}
	if own := cfg.InboundOwnAddresses(); !reflect.DeepEqual(own, []string{"agent@example.org", "agent@reply.example.org"}) {
		t.Errorf("own addresses %v", own)
	}
}

// An address belongs to one agent only: the second agent to claim it (in
// name order) is refused, naming the first. The same number on two
// channels, or in two agents on different channels, is no conflict.
func TestInboundAddressBelongsToOneAgent(t *testing.T) {
	_, err := checkInboundYAML(t, `agents:
  travel:
    a2a_url: http://127.0.0.1:9000/
    inbound: { email: [travel@example.org], sms: ["+15550001111"], whatsapp: ["+15550002222"] }
  billing:
    a2a_url: http://127.0.0.1:9001/
    inbound: { email: [help@example.org, Travel@Example.org], whatsapp: ["+15550001111"] }
  ops:
    a2a_url: http://127.0.0.1:9002/
    inbound: { sms: ["+15550001111"] }
`)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("accepted: %v", err)
	}
	want := []string{
		`line 16, column 24: agents.travel.inbound.email[0]: travel@example.org is already an inbound address of agent "billing" (agents.billing.inbound.email[1]): an address belongs to one agent only`,
		`line 16, column 51: agents.travel.inbound.sms[0]: +15550001111 is already an inbound address of agent "ops" (agents.ops.inbound.sms[0])`,
		// billing's WhatsApp +15550001111 is not travel's SMS
		// +15550001111; it is not Twilio's WhatsApp number, though.
		`line 19, column 74: agents.billing.inbound.whatsapp[0]: +15550001111 is not a number Twilio sends WhatsApp from`,
	}
	if len(ce.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(ce.Problems), len(want), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("lacks %q in:\n%v", w, err)
		}
	}
}

// Each inbound address needs the channel that receives it.
func TestInboundNeedsItsChannel(t *testing.T) {
	const key = "api_keys: [\"0123456789abcdef0123\"]\n"
	const agent = "agents:\n  travel:\n    a2a_url: http://127.0.0.1:9000/\n    inbound: "
	for _, tc := range []struct{ name, yaml, want string }{
		{"no email section", key + agent + "{ email: [travel@example.org] }\n",
			`line 5, column 24: agents.travel.inbound.email[0]: mail to travel@example.org is read by the email channel, which is off: add an email section with email.imap, the mailbox that receives travel@example.org`},
		{"no imap", key + "email: { from: a@example.org, smtp: { host: smtp.example.org } }\n" + agent + "{ email: [travel@example.org] }\n",
			`line 6, column 24: agents.travel.inbound.email[0]: mail to travel@example.org is read by the email channel's IMAP intake, and email.imap is not set: add email.imap`},
		{"no twilio (sms)", key + agent + "{ sms: [\"+15550001111\"] }\n",
			`line 5, column 22: agents.travel.inbound.sms[0]: messages to +15550001111 come through Twilio, which is not configured: add a twilio section with twilio.sms_from: "+15550001111"`},
		{"no twilio (whatsapp)", key + agent + "{ whatsapp: [\"+15550002222\"] }\n",
			`agents.travel.inbound.whatsapp[0]: messages to +15550002222 come through Twilio, which is not configured: add a twilio section with twilio.whatsapp_from: "whatsapp:+15550002222"`},
		{"messaging service only", key + "twilio: { account_sid: AC00000000000000000000000000000000, auth_token: t, messaging_service_sid: MG00000000000000000000000000000000 }\n" + agent + "{ sms: [\"+15550001111\"] }\n",
			`agents.travel.inbound.sms[0]: +15550001111 is not a number Twilio sends SMS from (twilio.sms_from; none is set)`},
	} {
		_, _, err := CheckBytes([]byte(tc.yaml), "t.yaml", env(nil), false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

// The example's commented inbound block and window template, uncommented,
// pass config check as they stand.
func TestExampleInboundBlockIsValid(t *testing.T) {
	raw, err := os.ReadFile("../beachd.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	uncommented := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trim := strings.TrimLeft(l, " ")
		if !strings.HasPrefix(trim, "# inbound:") && !strings.HasPrefix(trim, "# whatsapp:") {
			continue
		}
		// The block: this line and the more indented commented lines below.
		indent := len(l) - len(trim)
		for j := i; j < len(lines); j++ {
			t2 := strings.TrimLeft(lines[j], " ")
			if j > i && (len(lines[j])-len(t2) != indent || !strings.HasPrefix(t2, "#   ")) {
				break
			}
			lines[j] = strings.Repeat(" ", indent) + strings.TrimPrefix(t2, "# ")
			uncommented++
			i = j
		}
	}
	if uncommented < 10 {
		t.Fatalf("found %d commented lines of the inbound block and window template in the example", uncommented)
	}
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cfg, _, err := CheckBytes([]byte(strings.Join(lines, "\n")), "beachd.example.yaml", env(map[string]string{
		"BEACHD_API_KEY": "0123456789abcdef0123", "BILLING_WEBHOOK_SECRET": secret, "OPS_WEBHOOK_SECRET": secret,
		"SMTP_PASSWORD": "p", "IMAP_PASSWORD": "p", "TWILIO_ACCOUNT_SID": "AC00000000000000000000000000000000", "TWILIO_AUTH_TOKEN": "t"}), false)
	if err != nil {
		t.Fatalf("the example, inbound uncommented:\n%s\n%v", strings.Join(lines, "\n"), err)
	}
	in, ok := cfg.InboundAgents()["travel"]
	if !ok || len(in.Email) == 0 || len(in.SMS) == 0 || len(in.WhatsApp) == 0 || len(in.Allow) == 0 || cfg.Twilio.WhatsApp.WindowTemplate == "" {
		t.Errorf("the uncommented example: inbound %+v, window template %q", in, cfg.Twilio.WhatsApp.WindowTemplate)
	}
}

func TestAllowPatterns(t *testing.T) {
	for in, want := range map[string]string{
		"*": "*", " * ": "*", "*@Example.ORG": "*@example.org", "*@example.org.": "*@example.org", "*@xn--bcher-kva.example": "*@xn--bcher-kva.example",
		"+44*": "+44*", "+1*": "+1*", "+447700900123": "+447700900123", "Alice@Example.ORG": "alice@example.org",
		"*@": "", "*@-x.org": "", "*@a..b": "", "*@a b": "", "+": "", "+*": "", "+0*": "", "+123456789012345*": "", "+44 7700 900123": "",
		"+44*1": "", "a*@b.org": "", "**": "", "Alice <alice@example.org>": "", "<alice@example.org>": "", "alice": "", "": "",
		"whatsapp:+447700900123": "", "@example.org": "", "*.example.org": "",
	} {
		got, err := allowPattern(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("allowPattern(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestWindowTemplate(t *testing.T) {
	for sid, ok := range map[string]bool{
		"HX0123456789abcdef0123456789ABCDEF": true, "": true,
		"HX0123456789abcdef0123456789abcde": false, "hx0123456789abcdef0123456789abcdef": false, "MG0123456789abcdef0123456789abcdef": false,
	} {
		_, err := checkInboundYAML(t, "  whatsapp: { window_template: \""+sid+"\" }\n")
		if (err == nil) != ok {
			t.Errorf("window_template %q: %v, want ok=%v", sid, err, ok)
		}
	}
	if _, err := checkInboundYAML(t, "  whatsapp: { template: x }\n"); err == nil || !strings.Contains(err.Error(), "twilio.whatsapp.template: is not a known key") {
		t.Errorf("unknown key under twilio.whatsapp: %v", err)
	}
}

// Every entry an allow list, an email list or a number list accepts is
// given back in a form they accept again, unchanged.
func FuzzInboundEntries(f *testing.F) {
	for _, s := range []string{"*", "*@Example.org.", "+44*", "+447700900123", "Alice@Example.ORG", "whatsapp:+15550001111", "a+b@c.d", "x@[127.0.0.1]", `"a b"@c.d`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, parse := range map[string]func(string) (string, error){"allow": allowPattern, "email": inboundEmail, "number": inboundNumber} {
			n, err := parse(s)
			if err != nil {
				continue
			}
			again, err := parse(n)
			if err != nil || again != n {
				t.Fatalf("%s: %q → %q → %q, %v", name, s, n, again, err)
			}
		}
	})
}

// The bounds of an inbound section, and values of the wrong type named in
// plain words (and not judged again).
func TestInboundBounds(t *testing.T) {
	const agent = "agents:\n  travel:\n    a2a_url: http://127.0.0.1:9000/\n    inbound: { email: [travel@example.org], "
	for _, tc := range []struct{ yaml, want string }{
		{"idle_timeout: 1m", ""},
		{"idle_timeout: 720h", ""},
		{"idle_timeout: 59s", "inbound.idle_timeout: must be between 1m and 720h"},
		{"idle_timeout: 721h", "inbound.idle_timeout: must be between 1m and 720h"},
		{"idle_timeout: -1h", "inbound.idle_timeout: must be between 1m and 720h"},
		{"idle_timeout: a day", `inbound.idle_timeout: want a duration such as 30s, 5m or 24h, got "a day"`},
		{"max_turns: { per_minute: 1000, per_hour: 1000 }", ""},
		{"max_turns: { per_minute: 1001, per_hour: 2000 }", "inbound.max_turns.per_minute: must be between 1 and 1000 (0: the default, 10), got 1001"},
		{"max_turns: { per_minute: -1 }", "inbound.max_turns.per_minute: must be between 1 and 1000"},
		{"max_turns: { per_hour: 60001 }", "inbound.max_turns.per_hour: must be between 1 and 60000"},
		{"max_turns: { per_hour: 5 }", "inbound.max_turns.per_hour: must be at least per_minute: per_hour is 5, per_minute 10, the default"},
		{"max_turns: { per_minute: 11, per_hour: 10 }", "inbound.max_turns.per_hour: must be at least per_minute: per_hour is 10, per_minute 11"},
		{"max_turns: 10", "inbound.max_turns: want a section of keys (key: value), got 10"},
		{"refuse_unknown: sometimes", `inbound.refuse_unknown: want true or false, got "sometimes"`},
		{"allow: \"*\"", `inbound.allow: want a list, got "*"`},
		{"sms: \"+15550001111\"", `inbound.sms: want a list, got "+15550001111"`},
		{"mail: [x@example.org]", "inbound.mail: is not a known key (known keys here: email, sms, whatsapp, slack, allow, idle_timeout, max_turns, max_turns_per_sender, max_turns_per_agent, refuse_unknown)"},
	} {
		_, err := checkInboundYAML(t, agent+tc.yaml+" }\n")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.yaml, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s:\n got %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
	// email written as a string: the one problem is its type, not a
	// section without addresses.
	_, err := checkInboundYAML(t, "agents:\n  travel:\n    a2a_url: http://127.0.0.1:9000/\n    inbound: { email: travel@example.org }\n")
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], `inbound.email: want a list, got "travel@example.org"`) {
		t.Errorf("email as a string: %v", err)
	}
	// refuse_unknown is true unless set false.
	cfg, err := checkInboundYAML(t, "agents:\n  a: { a2a_url: http://127.0.0.1:9000/, inbound: { email: [a@example.org], refuse_unknown: true } }\n"+
		"  b: { a2a_url: http://127.0.0.1:9001/, inbound: { email: [b@example.org], refuse_unknown: false } }\n")
	if err != nil {
		t.Fatal(err)
	}
	if in := cfg.InboundAgents(); !in["a"].RefuseUnknown || in["b"].RefuseUnknown {
		t.Errorf("refuse_unknown: a %v, b %v", in["a"].RefuseUnknown, in["b"].RefuseUnknown)
	}
}

func TestInboundTurnLimits(t *testing.T) {
	limits := func(section string) (TurnLimits, error) {
		raw := `
api_keys: ["0123456789abcdef0123"]
email: { from: agent@example.org, authserv_id: mx.example.org, smtp: {host: smtp.example.org, port: 587},
  imap: {host: imap.example.org, username: u, password: p} }
agents:
  travel:
    a2a_url: "http://127.0.0.1:9000/"
    inbound: { email: [travel@example.org], allow: ["*"] ` + section + ` }
`
		cfg, err := Parse([]byte(raw), "test.yaml", func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.Validate(); err != nil {
			return TurnLimits{}, err
		}
		return cfg.InboundTurnLimits()["travel"], nil
	}
	for _, tc := range []struct {
		section string
		want    TurnLimits
	}{
		{"", TurnLimits{5, 30, 60, 1000}},
		{", max_turns: {per_minute: 3}", TurnLimits{5, 30, 60, 1000}},
		{", max_turns: {per_minute: 100, per_hour: 2000}", TurnLimits{100, 2000, 100, 2000}},
		{", max_turns_per_sender: {per_minute: 2, per_hour: 10}", TurnLimits{2, 10, 60, 1000}},
		{", max_turns: {per_minute: 100}, max_turns_per_sender: {per_minute: 2}, max_turns_per_agent: {per_minute: 7, per_hour: 70}", TurnLimits{2, 30, 7, 70}},
	} {
		got, err := limits(tc.section)
		if err != nil || got != tc.want {
			t.Errorf("inbound%s: %+v, %v; want %+v", tc.section, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ section, problem string }{
		{", max_turns_per_sender: {per_minute: -1}", "agents.travel.inbound.max_turns_per_sender.per_minute: must be between 1 and 1000"},
		{", max_turns_per_agent: {per_hour: 70000}", "agents.travel.inbound.max_turns_per_agent.per_hour: must be between 1 and 60000"},
		{", max_turns_per_sender: {per_minute: 40}", "agents.travel.inbound.max_turns_per_sender.per_hour: must be at least per_minute: per_hour is 30, the default, per_minute 40"},
	} {
		if _, err := limits(tc.section); err == nil || !strings.Contains(err.Error(), tc.problem) {
			t.Errorf("inbound%s: %v, want %q", tc.section, err, tc.problem)
		}
	}
}

// inbound.slack takes "im", "*" and channel ids, each claimed by one
// agent, and needs the slack section; allow takes Slack user ids.
func TestInboundSlack(t *testing.T) {
	const slackSection = "slack: { bot_token: xoxb-1234567890-abcdefghijkl, signing_secret: 0123456789abcdef0123456789abcdef }\n"
	cfg, err := checkInboundYAML(t, slackSection+`agents:
  travel:
    a2a_url: http://127.0.0.1:9000/
    inbound: { slack: [im, " C0123ABCD "], allow: [U0123ABCD, "*@example.org"] }
  desk:
    a2a_url: http://127.0.0.1:9001/
    inbound: { slack: ["*"], allow: ["*"] }
`)
	if err != nil {
		t.Fatal(err)
	}
	in := cfg.InboundAgents()
	if got := in["travel"]; !reflect.DeepEqual(got.Slack, []string{"im", "C0123ABCD"}) || !reflect.DeepEqual(got.Allow, []string{"U0123ABCD", "*@example.org"}) {
		t.Errorf("travel: slack %q allow %q", got.Slack, got.Allow)
	}
	if got := in["desk"].Slack; !reflect.DeepEqual(got, []string{"*"}) {
		t.Errorf("desk: slack %q", got)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"not an entry", slackSection + "agents:\n  a: { a2a_url: http://127.0.0.1:9000/, inbound: { slack: [general] } }\n",
			`agents.a.inbound.slack[0]: "general" is not a Slack inbound entry; write im (direct messages to the app), a channel id such as C0123ABCD`},
		{"a user is not a channel", slackSection + "agents:\n  a: { a2a_url: http://127.0.0.1:9000/, inbound: { slack: [U0123ABCD] } }\n",
			`agents.a.inbound.slack[0]: "U0123ABCD" is not a Slack inbound entry`},
		{"claimed twice", slackSection + "agents:\n  a: { a2a_url: http://127.0.0.1:9000/, inbound: { slack: [im] } }\n  b: { a2a_url: http://127.0.0.1:9001/, inbound: { slack: [im] } }\n",
			`agents.b.inbound.slack[0]: im is already an inbound address of agent "a" (agents.a.inbound.slack[0])`},
		{"no slack section", "agents:\n  a: { a2a_url: http://127.0.0.1:9000/, inbound: { slack: [im] } }\n",
			`agents.a.inbound.slack[0]: Slack messages reach beachd through the Slack app, which is not configured: add a slack section`},
		{"bad allow", slackSection + "agents:\n  a: { a2a_url: http://127.0.0.1:9000/, inbound: { slack: [im], allow: [u0123abcd] } }\n",
			`agents.a.inbound.allow[0]: "u0123abcd" is not an allow entry`},
	} {
		_, err := checkInboundYAML(t, tc.yaml)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.name, err, tc.want)
		}
	}
}
