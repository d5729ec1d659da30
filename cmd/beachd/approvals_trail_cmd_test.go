package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
)

// serveStore serves the approvals API (key "key") over the bbolt file at
// path until stop is called; cli runs beachd against it.
func serveStore(t *testing.T, path string) (cli func(args ...string) (int, string, string), ing *api.Ingester, stop func()) {
	t.Helper()
	db, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := approvals.New(approvals.Config{Secret: []byte(strings.Repeat("s", 32)), PublicURL: "http://x"}, db, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ing = api.NewIngester(api.IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true, "sms": true},
		Agents: map[string]bool{"travel": true}}, db, svc, nil, nil)
	srv, err := api.New(api.Config{APIKeys: []string{"key"}}, db, ing, nil, nil, nil, api.ApprovalRoutes(svc, nil))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			hs.Close()
			db.Close()
		}
	}
	t.Cleanup(stop)
	cli = func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "--url", hs.URL, "--api-key", "key"), func(string) string { return "" }, &out, &errb)
		return code, out.String(), errb.String()
	}
	return cli, ing, stop
}

// show prints a readable timeline; export prints every event as a JSON
// line; verify passes an intact chain, and after one stored event is
// edited in the bbolt file reports that event's position and exits 1.
func TestApprovalsTrailCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "beachd.db")
	cli, ing, stop := serveStore(t, path)
	for _, id := range []string{"appr-t1", "appr-t2"} {
		body := `{"envelope":{"role":"agent","parts":[{"data":{"approvalId":"` + id + `","toolName":"book","toolCallId":"c1","args":{},"handler":"h","turn":"t1","session":"s1","summary":"Book \u001b[31mthe flight"},"metadata":{"partType":"approval-request"}}],
		"meta":{"sessionId":"s1","turnId":"t1","producedAt":"2026-11-21T20:00:00Z","finalizedBy":"suspended"}},"to":[{"channel":"email","address":"alice@example.org"},{"channel":"sms","address":"+447700900123"}],"agent":"travel"}`
		if _, _, err := ing.Accept(context.Background(), []byte(body), "", "test"); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errs := cli("approvals", "decide", "appr-t1", "denied", "--reason", "too dear, said \"no\""); code != 0 {
		t.Fatalf("decide: %d %s", code, errs)
	}
	code, out, errs := cli("approvals", "show", "appr-t1")
	if code != 0 {
		t.Fatalf("show: %d %q %q", code, out, errs)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^appr-t1  Book \\x1b\[31mthe flight$`),
		regexp.MustCompile(`(?m)^  state    denied by operator:[0-9a-f]{8} on operator at `),
		regexp.MustCompile(`(?m)^Trail: 3 events, chain intact \(last hash [0-9a-f]{12}…\)\.$`),
		regexp.MustCompile(`(?m)^#\s+AT \(UTC\)\s+EVENT\s+WHO\s+CHANNEL\s+DETAIL$`),
		regexp.MustCompile(`(?m)^1\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+asked\s+alice@example.org\s+email\s*$`),
		regexp.MustCompile(`(?m)^2\s+.*asked\s+\+447700900123\s+sms\s*$`),
		regexp.MustCompile(`(?m)^3\s+.*decided\s+operator:[0-9a-f]{8}\s+operator\s+decision=denied reason="too dear, said \\"no\\""$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("show lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("show printed a raw escape character")
	}

	// export: every approval, one JSON line per event.
	code, out, errs = cli("approvals", "export")
	if code != 0 {
		t.Fatalf("export: %d %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("export printed %d lines, want 3 + 2:\n%s", len(lines), out)
	}
	var first struct {
		ApprovalID string          `json:"approvalId"`
		Event      approvals.Event `json:"event"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.ApprovalID != "appr-t1" || first.Event.Seq != 1 || first.Event.Kind != "asked" {
		t.Fatalf("first line %s: %+v %v", lines[0], first, err)
	}
	if h, _ := approvals.Hash(first.Event); h != first.Event.Hash {
		t.Fatal("an exported event does not match its hash")
	}
	if code, out, _ := cli("approvals", "export", "appr-t2"); code != 0 || strings.Count(out, "\n") != 2 || strings.Contains(out, "appr-t1") {
		t.Fatalf("export of one: %d %q", code, out)
	}

	if code, out, errs := cli("approvals", "verify", "appr-t1"); code != 0 || !strings.Contains(out, "appr-t1: 3 events, chain intact") {
		t.Fatalf("verify intact: %d %q %q", code, out, errs)
	}
	if code, _, errs := cli("approvals", "verify", "appr-nope"); code != 1 || !strings.Contains(errs, "404") {
		t.Fatalf("verify unknown: %d %q", code, errs)
	}

	// Edit event 2 of appr-t1 in the file: its actor becomes someone else.
	stop()
	tamper(t, path, func(b *bbolt.Bucket) {
		k := append([]byte("appr-t1\x00"), binary.BigEndian.AppendUint64(nil, 2)...)
		v := bytes.Replace(b.Get(k), []byte("+447700900123"), []byte("+447700900999"), 1)
		if err := b.Put(k, v); err != nil {
			t.Fatal(err)
		}
	})
	cli, _, stop = serveStore(t, path)
	code, out, errs = cli("approvals", "verify", "appr-t1")
	if code != 1 || !strings.Contains(errs, "appr-t1: trail of 3 events does not verify: event 2: changed") || out != "" {
		t.Fatalf("verify after an edit: %d %q %q", code, out, errs)
	}
	if code, out, _ := cli("approvals", "show", "appr-t1"); code != 1 || !strings.Contains(out, "CHAIN BROKEN at event 2: changed") {
		t.Fatalf("show after an edit: %d %q", code, out)
	}
	if code, _, _ := cli("approvals", "verify", "appr-t2"); code != 0 {
		t.Fatal("the other approval's trail no longer verifies")
	}

	// Remove event 1 of appr-t2: reported where it is missing.
	stop()
	tamper(t, path, func(b *bbolt.Bucket) {
		if err := b.Delete(append([]byte("appr-t2\x00"), binary.BigEndian.AppendUint64(nil, 1)...)); err != nil {
			t.Fatal(err)
		}
	})
	cli, _, _ = serveStore(t, path)
	if code, _, errs := cli("approvals", "verify", "appr-t2"); code != 1 || !strings.Contains(errs, "event 1: missing: event 1 was removed") {
		t.Fatalf("verify after a removal: %d %q", code, errs)
	}
}

// tamper edits the approval events bucket of the closed bbolt file at
// path, as someone with the file could.
func tamper(t *testing.T, path string, edit func(b *bbolt.Bucket)) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bbolt.Tx) error { edit(tx.Bucket([]byte("approval_events"))); return nil }); err != nil {
		t.Fatal(err)
	}
}
