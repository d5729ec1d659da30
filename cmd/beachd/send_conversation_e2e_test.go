package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// An agent that answers later posts to the conversation: `beachd send --to
// conversation:cnv_…` reaches the person on the conversation's channel,
// from the number they wrote to; an approval-request in it asks them with
// a code of their own, which they answer in the same thread.
func TestSendToConversation(t *testing.T) {
	d := startDev(t)
	const person = "+447700900123"
	res := d.devReply("sms", person, "Book me the 9:40 to Lisbon")
	if res.Conversation == "" {
		t.Fatalf("no conversation: %+v", res)
	}
	poll.Eventually(t, 20*time.Second, "the dev agent's answer", func() bool { return len(msgBodies(d, person)) >= 1 })

	raw, err := os.ReadFile("../../testdata/dev-approval.json")
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Envelope json.RawMessage `json:"envelope"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	env := strings.Replace(string(req.Envelope), "appr_dev_1", "appr_conv_later", 1)
	file := filepath.Join(t.TempDir(), "later.json")
	if err := os.WriteFile(file, []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"send", file, "--to", "conversation:" + res.Conversation, "--agent", "dev",
		"--url", d.base, "--api-key", d.key}, func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("send: %d %s %s", code, out.String(), errb.String())
	}
	code := smsCode(t, d, person)
	if got := d.devReply("sms", person, "YES "+code); got.ApprovalID != "appr_conv_later" || got.Decision != "granted" {
		t.Fatalf("the approval asked in the conversation: %+v", got)
	}
	// An unknown conversation is refused by name.
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"send", file, "--to", "conversation:cnv_unknown", "--agent", "dev",
		"--url", d.base, "--api-key", d.key}, func(string) string { return "" }, &out, &errb); code == 0 || !strings.Contains(errb.String(), "cnv_unknown") {
		t.Fatalf("send to an unknown conversation: %d %s %s", code, out.String(), errb.String())
	}
}
