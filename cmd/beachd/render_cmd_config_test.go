package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// renderCLI runs beachd with args and returns its exit code, stdout and
// stderr.
func renderCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, func(string) string { return "" }, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// itineraryEnvelope carries a consumer part type that only a configuration
// registers.
const itineraryEnvelope = `{"role": "agent", "parts": [
  {"text": "Your itinerary changed.", "metadata": {"partType": "response"}},
  {"data": {"slot": "dinner", "state": "booked"}, "metadata": {"partType": "ta.itinerary-slot-state"}}],
 "meta": {"sessionId": "s", "turnId": "t", "producedAt": "2026-04-20T09:50:00Z", "finalizedBy": "complete"}}`

// `beachd render --config` renders as the daemon on that file would: its
// public_url, templates, email addresses, approval code length, consumer
// part types and webhook endpoints. Without --config, the built-in
// defaults, as before.
func TestRenderCmdWithConfig(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "templates")
	writeFile(t, filepath.Join(tmpl, "email", "result.txt.tmpl"), "FROM THE CONFIGURED TEMPLATES\n{{.Text}}\n")
	conf := writeFile(t, filepath.Join(dir, "beachd.yaml"), `listen: 127.0.0.1:8025
public_url: https://beachd.example.net/
api_keys: ["0123456789abcdef"]
email: {from: "Travel desk <desk@travel.example>", reply_domain: reply.travel.example, message_id_domain: mail.travel.example, authserv_id: mx.travel.example, smtp: {host: smtp.travel.example}, imap: {host: imap.travel.example, username: desk}}
approvals: {sms_code_digits: 8}
part_types:
  - {id: ta.itinerary-slot-state, buffered: drop, allowed_transports: [webhook], requires_peer_consumes: true}
webhooks: {endpoints: {ops: {url: "https://ops.example.net/h", secret: "`+testWhsec+`", consumes: [ta.itinerary-slot-state]}}}
render: {templates_dir: `+tmpl+`}
`)
	approval := filepath.Join(sampleDir, "approval-request.json")
	simple := filepath.Join(sampleDir, "simple.json")
	itinerary := writeFile(t, filepath.Join(dir, "itinerary.json"), itineraryEnvelope)

	render := func(args ...string) string {
		t.Helper()
		// As of the samples' producedAt: their approval is still open.
		code, out, errs := renderCLI(t, append([]string{"render", "--now", "produced"}, args...)...)
		if code != 0 {
			t.Fatalf("render %v: exit %d: %s", args, code, errs)
		}
		return out
	}
	contains := func(what, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", what, w, out)
			}
		}
	}
	lacks := func(what, out string, unwanted ...string) {
		t.Helper()
		for _, w := range unwanted {
			if strings.Contains(out, w) {
				t.Errorf("%s: output has %q:\n%s", what, w, out)
			}
		}
	}

	// Without --config: the built-in defaults.
	out := render("--channel", "email", approval)
	contains("defaults", out, "http://127.0.0.1:8025/a/preview", "@example.org>")
	lacks("defaults", out, "beachd.example.net", "travel.example")
	lacks("default templates", render("--channel", "email", simple), "FROM THE CONFIGURED TEMPLATES")
	contains("default code", render("--channel", "sms", approval), "Reply YES 000000 or NO 000000\n")
	if code, _, errs := renderCLI(t, "render", "--channel", "webhook", "--to", "ops", itinerary); code == 0 || !strings.Contains(errs, "ta.itinerary-slot-state") {
		t.Errorf("a consumer part type without the configuration that registers it: exit %d, %s", code, errs)
	}

	// With --config.
	out = render("--config", conf, "--channel", "email", approval)
	contains("public_url", out, "Or decide on this page: https://beachd.example.net/a/preview\n")
	contains("email section", out, "Message-ID: <preview.previewpreviewpreviewprevi@mail.travel.example>",
		"Reply-To: <desk+previewpreviewpreviewprevi@reply.travel.example>")
	lacks("with config", out, "127.0.0.1")
	contains("templates_dir", render("--config", conf, "--channel", "email", simple), "FROM THE CONFIGURED TEMPLATES\nYour table for four")
	contains("sms_code_digits", render("--config", conf, "--channel", "sms", approval), "Reply YES 00000000 or NO 00000000\n")
	mime := render("--config", conf, "--channel", "email", "--format", "mime", "--to", "alice@example.org", simple)
	contains("email.from", mime, "From: \"Travel desk\" <desk@travel.example>")
	hook := render("--config", conf, "--channel", "webhook", "--to", "ops", itinerary)
	contains("part_types and the endpoint's consumes", hook, `"ta.itinerary-slot-state"`, `"booked"`)

	// Flags given override the file.
	out = render("--config", conf, "--public-url", "https://override.example.com", "--from", "x@override.example.com", "--channel", "email", approval)
	contains("flags over the file", out, "https://override.example.com/a/preview", "@mail.travel.example>")
	// The file's endpoints are the only ones.
	if code, _, errs := renderCLI(t, "render", "--config", conf, "--channel", "webhook", "--to", "nope", itinerary); code != 2 || !strings.Contains(errs, "webhooks.endpoints") {
		t.Errorf("unknown endpoint: exit %d, %s; want a usage error", code, errs)
	}
}

// A configuration that `beachd config check` refuses, `beachd render
// --config` refuses with the same words, each problem named by its key.
func TestRenderCmdBadConfigIsConfigCheckError(t *testing.T) {
	dir := t.TempDir()
	const keys = "api_keys: [\"0123456789abcdef\"]\n"
	broken := filepath.Join(dir, "templates")
	writeFile(t, filepath.Join(broken, "email", "result.txt.tmpl"), "{{.Text\n")
	for name, tc := range map[string]struct{ yaml, key string }{
		"invalid value":   {keys + "render: {sms: {policy: shout}}\n", "render.sms.policy:"},
		"unknown key":     {keys + "render: {sms: {policy: split, max: 3}}\n", "line 2, column 31: render.sms.max: is not a known key"},
		"flow-map type":   {keys + "webhooks: {endpoints: {ops: {url: \"https://x.org/\", timeout: soon}}}\n", "line 2, column 62: webhooks.endpoints.ops.timeout: want a duration"},
		"missing env":     {"api_keys: [\"${BEACHD_TEST_NOT_SET}\"]\n", "api_keys[0]: environment variable"},
		"broken template": {keys + "render: {templates_dir: " + broken + "}\n", "result.txt.tmpl:1"},
		"missing file":    {"", "read config"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
			if tc.yaml != "" {
				writeFile(t, path, tc.yaml)
			}
			checkCode, _, checkErr := renderCLI(t, "config", "check", "--config", path)
			code, out, errs := renderCLI(t, "render", "--config", path, "--channel", "email", filepath.Join(sampleDir, "simple.json"))
			if checkCode != 1 || !strings.Contains(checkErr, tc.key) {
				t.Fatalf("config check: exit %d, %q; want a failure naming %s", checkCode, checkErr, tc.key)
			}
			if code != checkCode || errs != checkErr || out != "" {
				t.Errorf("render: exit %d, stderr %q, stdout %q\nwant exit %d and config check's error %q", code, errs, out, checkCode, checkErr)
			}
		})
	}
}

// Without --config, render does not read the default beachd.yaml: it keeps
// working on the built-in defaults wherever it runs.
func TestRenderCmdWithoutConfigIgnoresDefaultFile(t *testing.T) {
	simple, err := filepath.Abs(filepath.Join(sampleDir, "simple.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "beachd.yaml"), "not: [valid\n")
	t.Chdir(dir)
	code, out, errs := renderCLI(t, "render", "--channel", "email", simple)
	if code != 0 || !strings.Contains(out, "Your table for four") {
		t.Errorf("exit %d, %s%s", code, out, errs)
	}
}

// With approvals.email_links off the previewed mail has no decision link,
// as the daemon's would not; with it on (the default) it has one.
func TestRenderCmdEmailLinksOff(t *testing.T) {
	dir := t.TempDir()
	sample := filepath.Join("..", "..", "testdata", "envelopes", "approval-request.json")
	on := writeFile(t, filepath.Join(dir, "on.yaml"), "public_url: https://beachd.example.net\napi_keys: [\"0123456789abcdef\"]\n")
	off := writeFile(t, filepath.Join(dir, "off.yaml"), "public_url: https://beachd.example.net\napi_keys: [\"0123456789abcdef\"]\napprovals: {email_links: false}\n")
	code, out, errs := renderCLI(t, "render", "--config", on, "--now", "produced", "--channel", "email", sample)
	if code != 0 || !strings.Contains(out, "https://beachd.example.net/a/") {
		t.Fatalf("links on: exit %d, %s\n%s", code, errs, out)
	}
	code, out, errs = renderCLI(t, "render", "--config", off, "--now", "produced", "--channel", "email", sample)
	if code != 0 || strings.Contains(out, "/a/") || !strings.Contains(out, "[approval:") {
		t.Fatalf("links off: exit %d, %s\n%s", code, errs, out)
	}
}

// With email.smtp but no email.imap nobody reads replies: the mail offers
// the confirmation link and never asks for a reply; with imap it does.
func TestRenderCmdNoReplyIntake(t *testing.T) {
	dir := t.TempDir()
	sample := filepath.Join("..", "..", "testdata", "envelopes", "approval-request.json")
	base := "public_url: https://beachd.example.net\napi_keys: [\"0123456789abcdef\"]\n"
	smtpOnly := writeFile(t, filepath.Join(dir, "smtp.yaml"), base+"email: {from: a@example.net, smtp: {host: smtp.example.net}}\n")
	withIMAP := writeFile(t, filepath.Join(dir, "imap.yaml"), base+"email: {from: a@example.net, authserv_id: mx.example.net, smtp: {host: smtp.example.net}, imap: {host: imap.example.net, username: a}}\n")
	code, out, errs := renderCLI(t, "render", "--config", smtpOnly, "--now", "produced", "--channel", "email", sample)
	if code != 0 || strings.Contains(strings.ToLower(out), "reply to this email") || strings.Contains(out, "[approval:") ||
		!strings.Contains(out, "To answer, open this page: https://beachd.example.net/a/") || !strings.Contains(out, "Replies to this message are not read.") {
		t.Fatalf("smtp only: exit %d, %s\n%s", code, errs, out)
	}
	code, out, errs = renderCLI(t, "render", "--config", withIMAP, "--now", "produced", "--channel", "email", sample)
	if code != 0 || !strings.Contains(out, "reply to this email") || !strings.Contains(out, "[approval:") {
		t.Fatalf("with imap: exit %d, %s\n%s", code, errs, out)
	}
}
