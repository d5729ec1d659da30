package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

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

// Type errors are told in plain words: what the key wants, what it got.
func TestConfigTypeErrorsInPlainWords(t *testing.T) {
	const keys = "api_keys: [\"0123456789abcdef\"]\n"
	for y, want := range map[string]string{
		"dispatch: {workers: eight}":                      `dispatch.workers: want a whole number, got "eight"`,
		"dispatch: {workers: 99999999999999999999}":       `dispatch.workers: want a whole number, got 99999999999999999999 (out of range)`,
		"approvals: {email_links: yes please}":            `approvals.email_links: want true or false, got "yes please"`,
		"retention: 7 days":                               `retention: want a duration such as 30s, 5m or 24h, got "7 days"`,
		"retention: 3600":                                 `retention: want a duration such as 30s, 5m or 24h, got 3600`,
		"api_keys: 0123456789abcdef":                      `api_keys: want a list, got "0123456789abcdef"`,
		"agents: [travel]":                                `agents: want a map of names to values (name: value), got a list`,
		"email: on":                                       `email: want a section of keys (key: value), got "on"`,
		"listen: [a, b]":                                  `listen: want a single value (text), got a list`,
		"twilio: {account_sid: x, rate_per_second: fast}": `twilio.rate_per_second: want a number, got "fast"`,
	} {
		yaml := keys + y + "\n"
		if strings.HasPrefix(y, "api_keys") {
			yaml = y + "\n"
		}
		_, err := parseConfig([]byte(yaml), "t.yaml", env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", y, err, want)
		}
	}
}

func TestCheckListenAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8025": true, ":8025": true, "[::1]:0": true, "localhost:65535": true, "beachd.lan:80": true,
		"127.0.0.1:80250": false, "127.0.0.1:65536": false, "127.0.0.1:-1": false, "127.0.0.1:http": false,
		"127.0.0.1": false, "127.0.0.1:": false, "a b:80": false, "": false,
	} {
		if err := checkListenAddr(addr); (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%v", addr, err, ok)
		}
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

var problemLine = regexp.MustCompile(`^  line (\d+), column (\d+): `)

// Whatever the file, checking it does not panic, and the problems come in
// the order of the file, those of missing keys last.
func FuzzCheckConfig(f *testing.F) {
	if raw, err := os.ReadFile("../../beachd.example.yaml"); err == nil {
		f.Add(raw)
	}
	f.Add([]byte("listen: 127.0.0.1:80250\napi_keys: [\"${X}\", 5]\ndispatch: {workers: eight}\nschedules: [{cron: x, time_zone: Y}]\n"))
	f.Add([]byte("d: &d {timeout: soon}\nagents: {a: *d, b: {<<: *d, timeout: 1s, z: 1}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		_, _, err := checkConfig(b, "fuzz.yaml", env(map[string]string{"X": "0123456789abcdef"}), true)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			return
		}
		last, lastCol, unplaced := 0, 0, false
		for _, p := range strings.Split(ce.Error(), "\n")[1:] {
			m := problemLine.FindStringSubmatch(p)
			if m == nil {
				unplaced = true
				continue
			}
			line, _ := strconv.Atoi(m[1])
			col, _ := strconv.Atoi(m[2])
			if unplaced || line < last || line == last && col < lastCol {
				t.Fatalf("problems out of order:\n%v", err)
			}
			last, lastCol = line, col
		}
	})
}

// A missing templates directory is one problem, not one from validation
// and another from loading the templates.
func TestMissingTemplatesDirReportedOnce(t *testing.T) {
	y := "api_keys: [\"0123456789abcdef\"]\nrender: {templates_dir: " + filepath.Join(t.TempDir(), "none") + "}\n"
	_, _, err := checkConfig([]byte(y), "t.yaml", env(nil), true)
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], "render.templates_dir") {
		t.Fatalf("got %v", err)
	}
}

// A DKIM key the sender cannot parse is found by config check (and so
// before serve creates anything), not when the sender is built.
func TestDKIMKeyIsParsedByConfigCheck(t *testing.T) {
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	good := writeFile(t, filepath.Join(dir, "good.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	bad := writeFile(t, filepath.Join(dir, "bad.pem"), "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
	conf := func(key string) []byte {
		return []byte("api_keys: [\"0123456789abcdef\"]\nemail: {from: a@b.org, smtp: {host: h.org, dkim: {domain: b.org, selector: s, private_key_file: " + key + "}}}\n")
	}
	if _, _, err := checkConfig(conf(good), "t.yaml", env(nil), true); err != nil {
		t.Errorf("a valid Ed25519 key refused: %v", err)
	}
	if _, _, err := checkConfig(conf(bad), "t.yaml", env(nil), true); err == nil || !strings.Contains(err.Error(), "line 2, column") ||
		!strings.Contains(err.Error(), "email.smtp.dkim.private_key_file: "+bad+": not a PEM RSA or Ed25519 private key") {
		t.Errorf("an unusable key: %v", err)
	}
}
