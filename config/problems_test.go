package config

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

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
		_, err := Parse([]byte(yaml), "t.yaml", env(nil))
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

var problemLine = regexp.MustCompile(`^  line (\d+), column (\d+): `)

// Whatever the file, checking it does not panic, and the problems come in
// the order of the file, those of missing keys last.
func FuzzCheckConfig(f *testing.F) {
	if raw, err := os.ReadFile("../beachd.example.yaml"); err == nil {
		f.Add(raw)
	}
	f.Add([]byte("listen: 127.0.0.1:80250\napi_keys: [\"${X}\", 5]\ndispatch: {workers: eight}\nschedules: [{cron: x, time_zone: Y}]\n"))
	f.Add([]byte("d: &d {timeout: soon}\nagents: {a: *d, b: {<<: *d, timeout: 1s, z: 1}}\n"))
	f.Add([]byte("approvals:\n  policies:\n    - name: p\n      match: {when: \"args.x <\"}\n      quorum: 3\n      steps: [{to: [{person: c, channels: [{channel: sms, address: x}]}, {channel: email, addres: y}]}, {to: envelope}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		_, _, err := CheckBytes(b, "fuzz.yaml", env(map[string]string{"X": "0123456789abcdef"}), false)
		var ce *Error
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
	_, _, err := CheckBytes([]byte(y), "t.yaml", env(nil), false)
	var ce *Error
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
	if _, _, err := CheckBytes(conf(good), "t.yaml", env(nil), false); err != nil {
		t.Errorf("a valid Ed25519 key refused: %v", err)
	}
	if _, _, err := CheckBytes(conf(bad), "t.yaml", env(nil), false); err == nil || !strings.Contains(err.Error(), "line 2, column") ||
		!strings.Contains(err.Error(), "email.smtp.dkim.private_key_file: "+bad+": not a PEM RSA or Ed25519 private key") {
		t.Errorf("an unusable key: %v", err)
	}
}

// An alias inside its own anchor (which yaml refuses) is followed once
// when problems are placed, not to the index's budget of 65,536 nodes: each
// level made a longer path, and a one-line file took seconds. The fuzzer
// found it.
func TestRecursiveAliasIsWalkedOnce(t *testing.T) {
	for _, s := range []string{"d: &d {a: *d}\n", "d: &d [*d]\n", "agents: &d {a: *d}\n", "agents: {a: &d {inbound: *d}}\n"} {
		var root yaml.Node
		if err := yaml.Unmarshal([]byte(s), &root); err != nil {
			t.Fatal(err)
		}
		if n := len(indexKeys(&root)); n > 100 {
			t.Errorf("%q: %d key paths indexed; the alias was followed into itself", s, n)
		}
		if _, _, err := CheckBytes([]byte(s), "fuzz.yaml", env(nil), false); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
}
