package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestDeliveriesListCommand(t *testing.T) {
	ctx := context.Background()
	_, _, ing, hs := approvalsAPI(t)
	body := `{"envelope":{"role":"agent","parts":[{"text":"hi","metadata":{"partType":"response"}}],
	"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-11-21T20:00:00Z","finalizedBy":"complete"}},
	"to":[{"channel":"email","address":"alice@example.org"}],"agent":"travel"}`
	acc, _, err := ing.Accept(ctx, []byte(body), "", "test")
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(ctx, append(args, "--url", hs.URL, "--api-key", "key"), func(string) string { return "" }, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := cli("deliveries", "list")
	if code != 0 {
		t.Fatalf("list: %d %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("list: want a header and one delivery, got %q", out)
	}
	fields := strings.Fields(lines[1])
	want := []string{acc.Deliveries[0].ID, acc.ID, "email", "alice@example.org", "queued", "0"}
	if len(fields) < len(want)+1 || strings.Join(fields[:len(want)], " ") != strings.Join(want, " ") || strings.HasPrefix(fields[len(want)], "0001") {
		t.Fatalf("list row %q, want %q and the update time", lines[1], want)
	}
	if code, out, _ := cli("deliveries", "list", "--state", "dead"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("list dead: %d %q", code, out)
	}
}
