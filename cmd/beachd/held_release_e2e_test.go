package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// TestHeldMessageReleasedByTheOperator: in the daemon, one number texting
// the agent six times in a minute gets five turns (the default sender
// limit); the sixth is held, saying which limit held it; `beachd inbound
// release` lets it start its turn, which the agent answers.
func TestHeldMessageReleasedByTheOperator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	d := startDev(t)
	const person = "+447700900411"
	var outcomes []string
	for i := range 6 {
		outcomes = append(outcomes, d.devReply("sms", person, fmt.Sprintf("message %d", i)).Outcome)
	}
	if got := strings.Join(outcomes, " "); got != "turn turn turn turn turn held" {
		t.Fatalf("six texts in a minute: %s", got)
	}
	var held struct {
		Inbound []struct{ ID, Reason, Text, Disposition string }
	}
	d.do("GET", "/v1/inbound?disposition=held", nil, "", &held)
	if len(held.Inbound) != 1 || held.Inbound[0].Reason != "sender limit: 5 turns a minute" || held.Inbound[0].Text != "message 5" {
		t.Fatalf("held messages %+v", held.Inbound)
	}
	id := held.Inbound[0].ID
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"inbound", "release", id, "--url", d.base, "--api-key", d.key},
		func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("beachd inbound release: exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), id+" released: turn trn_") {
		t.Fatalf("release printed %q", out.String())
	}
	poll.Eventually(t, 20*time.Second, "the agent's answer to the released message", func() bool {
		for _, m := range d.messages().Messages {
			if m.To == person && strings.Contains(m.Body, `"message 5"`) {
				return true
			}
		}
		return false
	})
	if code := run(context.Background(), []string{"inbound", "release", id, "--url", d.base, "--api-key", d.key},
		func(string) string { return "" }, &out, &errb); code == 0 {
		t.Fatal("releasing a message that is no longer held succeeded")
	}
}
