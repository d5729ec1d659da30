package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// A decision the agent never received (dead-lettered injection) shows in
// `beachd approvals list` without any flag.
func TestApprovalsListShowsDeadInjections(t *testing.T) {
	ctx := context.Background()
	db, svc, ing, hs := approvalsAPI(t)
	for _, id := range []string{"appr-dead", "appr-fine"} {
		body := `{"envelope":{"role":"agent","parts":[{"data":{"approvalId":"` + id + `","toolName":"book","toolCallId":"c1","args":{},"handler":"h","turn":"t1","session":"s1","summary":"Book the flight"},"metadata":{"partType":"approval-request"}}],
	"meta":{"sessionId":"s1","turnId":"t1","producedAt":"2026-11-21T20:00:00Z","finalizedBy":"suspended"}},"to":[{"channel":"email","address":"alice@example.org"}],"agent":"travel"}`
		if _, _, err := ing.Accept(ctx, []byte(body), "", "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Decide(ctx, id, envelope.DecisionGranted, "", "k1"); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := db.ClaimInjections(ctx, time.Now().Add(time.Second), 10, time.Minute)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claimed %d: %v", len(jobs), err)
	}
	for _, j := range jobs {
		o := store.InjectionOutcome{State: store.InjectionDone, At: time.Now()}
		if j.ApprovalID == "appr-dead" {
			o = store.InjectionOutcome{State: store.InjectionDead, Error: "permanent: task is completed", At: time.Now()}
		}
		if _, err := db.RecordInjection(ctx, j, o); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	code := run(ctx, []string{"approvals", "list", "--url", hs.URL, "--api-key", "key"}, func(string) string { return "" }, &out, &errb)
	if code != 0 {
		t.Fatalf("list: %d %s", code, errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	var deadLine, fineLine string
	for _, l := range lines {
		if strings.HasPrefix(l, "appr-dead") {
			deadLine = l
		}
		if strings.HasPrefix(l, "appr-fine") {
			fineLine = l
		}
	}
	if !strings.Contains(deadLine, "DEAD") || !strings.Contains(fineLine, "done") ||
		!strings.Contains(out.String(), "1 decision(s) never reached the agent") || !strings.Contains(out.String(), "appr-dead") {
		t.Fatalf("list output:\n%s", out.String())
	}
}
