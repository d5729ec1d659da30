package main

// The `beachd config check` command and `beachd serve` on a configuration
// file, driven through run as a person runs them. The checks themselves are
// tested in package config.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/store/postgres"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// testWhsec is a valid Standard Webhooks secret.
const testWhsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// config check refuses what serve would refuse at start.
func TestConfigCheckMatchesServe(t *testing.T) {
	dir := t.TempDir()
	for name, extra := range map[string]string{
		"twilio without credentials": "twilio: {sms_from: \"+15555550100\"}\n",
		"unreadable injector secret": "agents: {a: {injector: webhook, webhook_url: \"https://x.example/i\", webhook_secret: \"not-a-secret\"}}\n",
	} {
		path := filepath.Join(dir, "c.yaml")
		os.WriteFile(path, []byte("listen: 127.0.0.1:1\napi_keys: [\"0123456789abcdef\"]\n"+extra), 0o600)
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"config", "check", "--config", path}, func(string) string { return "" }, &out, &errb)
		if key := map[bool]string{true: "twilio.", false: "webhook_secret"}[strings.HasPrefix(name, "twilio")]; code == 0 || !strings.Contains(errb.String(), key) {
			t.Errorf("%s: config check exit %d, %q; want a failure naming %s", name, code, errb.String(), key)
		}
	}
}

// One run of `beachd config check` reports every problem it can find:
// unknown keys, values of the wrong type, invalid values, unset variables,
// bad zones, bad cron specs and bad addresses, each naming its key, in the
// order of the file.
func TestConfigCheckReportsEveryProblemAtOnce(t *testing.T) {
	const y = `listen: 127.0.0.1:80250
api_keys: ["${BEACHD_API_KEY}"]
dispatch:
  workers: eight
log: {format: xml, levle: info}
agents:
  travel: {a2a_url: http://127.0.0.1:9000/, timeout: soon}
render:
  time_zone: Europe/Londn
webhooks:
  endpoints:
    ops: {url: https://ops.example.org/hook, secret: "${OPS_SECRET}", consumes: [domain-data]}
approvals:
  email_links: maybe
schedules:
  - {name: brief, cron: "0 8 * * MON-FRX", time_zone: Mars/Base, agent: travel, message: hi, to: [{channel: email, address: a@example.org}]}
  - {name: b2, cron: "99 8 * * *", agent: travel, message: hi, to: [], retries: many}
  - {name: b3, cron: "@daily", agent: travel, message: hi, to: [{channel: email, address: "alice at example"}, {channel: sms, address: "07700 900123"}]}
`
	path := filepath.Join(t.TempDir(), "beachd.yaml")
	writeFile(t, path, y)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"config", "check", "--config", path}, env(nil), &out, &errb)
	if code != 1 {
		t.Fatalf("exit %d, %s", code, errb.String())
	}
	want := []string{ // in file order
		`line 1, column 9: listen: port must be a number from 0 to 65535, got "80250"`,
		`line 2, column 12: api_keys[0]: environment variable BEACHD_API_KEY is not set`,
		`line 4, column 12: dispatch.workers: want a whole number, got "eight"`,
		`line 5, column 15: log.format: must be text or json, got "xml"`,
		`line 5, column 20: log.levle: is not a known key`,
		`line 7, column 54: agents.travel.timeout: want a duration such as 30s, 5m or 24h, got "soon"`,
		`line 9, column 14: render.time_zone: unknown time zone "Europe/Londn"`,
		`line 12, column 54: webhooks.endpoints.ops.secret: environment variable OPS_SECRET is not set`,
		`line 14, column 16: approvals.email_links: want true or false, got "maybe"`,
		`line 16, column 25: schedules[0].cron:`,
		`line 16, column 55: schedules[0].time_zone:`,
		`line 17, column 22: schedules[1].cron:`,
		`line 17, column 64: schedules[1].to:`,
		`line 17, column 81: schedules[1].retries: want a whole number, got "many"`,
		`line 18, column 91: schedules[2].to[0].address: schedule "b3": not an RFC 5322 address`,
		`line 18, column 136: schedules[2].to[1].address: schedule "b3": must be an E.164 number`,
	}
	got := errb.String()
	at := 0
	for _, w := range want {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Errorf("lacks (or out of order) %q", w)
			continue
		}
		at += i + len(w)
	}
	// A value already refused (unset variable, wrong type) is not judged
	// again as if it had been written empty.
	for _, no := range []string{"api_keys[0]: must be at least", "ops.secret: required", "cannot unmarshal", "!!str"} {
		if strings.Contains(got, no) {
			t.Errorf("reports %q", no)
		}
	}
	if t.Failed() {
		t.Logf("got:\n%s", got)
	}
}

// serve checks the whole file before it creates or opens anything: a bad
// listen address (or any other problem) leaves no data dir behind.
func TestServeChecksBeforeTouchingDataDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for name, listen := range map[string]string{"port out of range": "127.0.0.1:80250", "port in use": busy.Addr().String()} {
		path := filepath.Join(dir, "c.yaml")
		writeFile(t, path, "listen: "+listen+"\ndata_dir: "+data+"\napi_keys: [\"0123456789abcdef\"]\n")
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"serve", "--config", path}, env(nil), &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "listen") {
			t.Errorf("%s: exit %d, %q; want a failure naming listen", name, code, errb.String())
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: data dir created (%v)", name, err)
		}
	}
}

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

// One config check reports every problem of the inbound sections, each at
// its entry, naming the bad value and showing a good one.
func TestInboundProblemsAtTheirEntries(t *testing.T) {
	const agents = `agents:
  travel:
    a2a_url: http://127.0.0.1:9000/
    inbound:
      email: ["Travel <travel@example.org>", "travel+x@example.org", "not-mail", "ok@example.org", "OK@example.org"]
      sms: ["+44 7700 900123", "+15550009999"]
      whatsapp: ["+15550001111"]
      allow: ["*@", "+44", "+0*", "bob*@example.org", "whatsapp:+447700900123", "alice", "*@example.org"]
      idle_timeout: 30s
      max_turns: { per_minute: 20, per_hour: -1 }
  hooks:
    injector: webhook
    webhook_url: https://hooks.example.org/
    webhook_secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
    inbound: { idle_timeout: 1000h, max_turns: { per_minute: 200 } }
`
	path := filepath.Join(t.TempDir(), "beachd.yaml")
	writeFile(t, path, inboundBase+twilioWindow+agents)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"config", "check", "--config", path}, env(nil), &out, &errb); code != 1 {
		t.Fatalf("exit %d, %s", code, errb.String())
	}
	want := []string{ // in file order
		`line 13, column 32: twilio.whatsapp.window_template: must be a content SID, HX followed by 32 hex digits (HX0123456789abcdef0123456789abcdef), got "HX123"`,
		`line 18, column 15: agents.travel.inbound.email[0]: "Travel <travel@example.org>": write the bare address, such as travel@example.org`,
		`line 18, column 46: agents.travel.inbound.email[1]: "travel+x@example.org": no '+' in the local part`,
		`line 18, column 70: agents.travel.inbound.email[2]: "not-mail" is not an email address; write one such as travel@example.org`,
		`line 18, column 100: agents.travel.inbound.email[4]: ok@example.org is listed twice (also email[3])`,
		`line 19, column 13: agents.travel.inbound.sms[0]: "+44 7700 900123" is not an E.164 number; write one such as +15550001111`,
		`line 19, column 32: agents.travel.inbound.sms[1]: +15550009999 is not a number Twilio sends SMS from (twilio.sms_from; it is +15550001111): answers go out from the number written to, so set twilio.sms_from: "+15550009999"`,
		`line 20, column 18: agents.travel.inbound.whatsapp[0]: +15550001111 is not a number Twilio sends WhatsApp from (twilio.whatsapp_from; it is +15550002222)`,
		`line 21, column 15: agents.travel.inbound.allow[0]: "*@" is not an allow entry (not a domain after *@); write an address (alice@example.org), a domain (*@example.org), a number (+447700900123), a number prefix (+44*), a Slack user (U0123ABCD) or * for everyone`,
		`line 21, column 21: agents.travel.inbound.allow[1]: "+44" is not an allow entry (not an E.164 number)`,
		`line 21, column 28: agents.travel.inbound.allow[2]: "+0*" is not an allow entry (a number prefix is + and 1 to 14 digits, the first not 0, then *)`,
		`line 21, column 35: agents.travel.inbound.allow[3]: "bob*@example.org" is not an allow entry (* stands alone`,
		`line 21, column 55: agents.travel.inbound.allow[4]: "whatsapp:+447700900123" is not an allow entry (a number is allowed on SMS and WhatsApp alike: write it without whatsapp:)`,
		`line 21, column 81: agents.travel.inbound.allow[5]: "alice" is not an allow entry; write an address`,
		`line 22, column 21: agents.travel.inbound.idle_timeout: must be between 1m and 720h (30 days; 0: the default, 24h), got 30s`,
		`line 23, column 46: agents.travel.inbound.max_turns.per_hour: must be between 1 and 60000 (0: the default, 100), got -1`,
		`line 28, column 5: agents.hooks.inbound.email: none of email, sms, whatsapp and slack is set: list the addresses people write to, or leave inbound out`,
		`line 28, column 5: agents.hooks.inbound: needs agents.hooks.a2a_url: a conversation is a series of A2A turns with the agent`,
		`line 28, column 30: agents.hooks.inbound.idle_timeout: must be between 1m and 720h (30 days; 0: the default, 24h), got 1000h0m0s`,
		`line 28, column 37: agents.hooks.inbound.max_turns.per_hour: must be at least per_minute: per_hour is 100, the default, per_minute 200`,
	}
	got := errb.String()
	at := 0
	for _, w := range want {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Errorf("lacks (or out of order) %q", w)
			continue
		}
		at += i + len(w)
	}
	// The valid entries raise nothing, and a bad entry is not judged
	// again by the channel checks.
	for _, no := range []string{"email[3]:", "allow[6]", "max_turns.per_minute", "is read by the email channel", "sms[0]: +"} {
		if strings.Contains(got, no) {
			t.Errorf("reports %q", no)
		}
	}
	if t.Failed() {
		t.Logf("got:\n%s", got)
	}
}

const twilioWindow = "  whatsapp: { window_template: HX123 }\n"

const storeConfigBase = "listen: 127.0.0.1:1\napi_keys: [\"0123456789abcdef\"]\n"

// configCheck runs `beachd config check` on a file with the store section.
func configCheck(t *testing.T, storeYAML string) (code int, stdout, stderr string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(storeConfigBase+storeYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code = run(context.Background(), []string{"config", "check", "--config", path}, func(string) string { return "" }, &out, &errb)
	return code, out.String(), errb.String()
}

// config check connects to the database of store.driver postgres and says
// its schema version, without creating anything; a database it cannot
// reach is a problem at store.dsn.
func TestConfigCheckConnectsToPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	code, out, errs := configCheck(t, fmt.Sprintf("store:\n  driver: postgres\n  dsn: %q\n", dsn))
	if code != 0 || !strings.Contains(out, "no beachd tables yet; beachd serve creates them (schema version") || !strings.HasSuffix(out, ": ok\n") {
		t.Fatalf("fresh schema: exit %d\n%s%s", code, out, errs)
	}
	db, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, out, errs = configCheck(t, fmt.Sprintf("store:\n  driver: postgres\n  dsn: %q\n", dsn))
	if want := fmt.Sprintf("schema version %d, up to date", postgres.SchemaVersion()); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("migrated schema: exit %d, want %q\n%s%s", code, want, out, errs)
	}

	code, out, errs = configCheck(t, "store:\n  driver: postgres\n  dsn: \"postgres://root:secretpw@127.0.0.1:1/test?connect_timeout=2\"\n")
	if code != 1 || !strings.Contains(errs, "line 5, column 8: store.dsn: cannot connect to root@127.0.0.1:1/test") || strings.Contains(errs+out, "secretpw") {
		t.Fatalf("unreachable database: exit %d\n%s%s", code, out, errs)
	}
}

// config check accepts a policy, and refuses a CEL error with its place
// in the file and in the expression.
func TestConfigCheckPolicyWarningsAndErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	base := "listen: 127.0.0.1:1\napi_keys: [\"0123456789abcdef\"]\nagents: {travel: {a2a_url: http://127.0.0.1:9000/}}\n" +
		"approvals:\n  policies:\n    - name: quick\n      match: {agent: travel, when: %q}\n      decide: granted\n"
	os.WriteFile(path, []byte(fmt.Sprintf(base, "double(args.amount) < 10.0")), 0o600)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"config", "check", "--config", path}, func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if want := "c.yaml: ok"; !strings.Contains(out.String(), want) || strings.Contains(out.String(), "warning") {
		t.Errorf("output %q, want %q alone", out.String(), want)
	}
	os.WriteFile(path, []byte(fmt.Sprintf(base, "args.amount < 10 && args.nosuch.")), 0o600)
	out.Reset()
	errb.Reset()
	code := run(context.Background(), []string{"config", "check", "--config", path}, func(string) string { return "" }, &out, &errb)
	if want := "line 7, column 36: approvals.policies[0].match.when: expression line 1, column 33: Syntax error"; code == 0 || !strings.Contains(errb.String(), want) {
		t.Errorf("exit %d, %q; want a failure with %q", code, errb.String(), want)
	}
}
