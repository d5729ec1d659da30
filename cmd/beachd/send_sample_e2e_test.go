package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/poll"
)

var sampleIDRe = regexp.MustCompile(`sample approval (appr_dev_[0-9a-f]+)`)

// The dev walk-through, repeated: `beachd send --sample approval` twice,
// each answered by SMS, each decision reaching the dev agent, and each
// confirmation saying so. Sending the README's file twice is refused (409
// naming the path) instead of leading to a decision that goes nowhere.
func TestSendSampleApprovalRepeats(t *testing.T) {
	d := startDev(t)
	const num = "+15555550100"
	yesCount := func() int {
		n := 0
		for _, m := range d.messages().Messages {
			if m.Channel == "sms" && m.To == num && codeRe.MatchString(m.Body) {
				n++
			}
		}
		return n
	}
	for round := 1; round <= 2; round++ {
		before := yesCount()
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"send", "--sample", "approval", "--url", d.base, "--api-key", d.key},
			func(string) string { return "" }, &out, &errb)
		m := sampleIDRe.FindStringSubmatch(errb.String())
		if code != 0 || m == nil {
			t.Fatalf("round %d: send --sample approval: %d %s %s", round, code, out.String(), errb.String())
		}
		id := m[1]
		poll.Eventually(t, 20*time.Second, "the approval SMS", func() bool { return yesCount() > before })
		sms := smsCode(t, d, num)
		d.devReply("sms", num, "YES "+sms)
		poll.Eventually(t, 20*time.Second, "the decision at the agent", func() bool {
			for _, r := range d.agentReceived().Received {
				if r.ApprovalResponse.ApprovalID == id {
					return true
				}
			}
			return false
		})
		poll.Eventually(t, 20*time.Second, "the confirmation", func() bool {
			return strings.Count(strings.Join(msgBodies(d, num), "\n"), "passed to the agent") >= round
		})
	}
	// The README's file, twice: the second is refused, naming the path.
	raw, err := os.ReadFile("../../testdata/dev-approval.json")
	if err != nil {
		t.Fatal(err)
	}
	var first, second map[string]any
	if c := d.do("POST", "/v1/deliveries", bytes.NewReader(raw), "application/json", &first); c != 202 {
		t.Fatalf("first file request: %d %v", c, first)
	}
	if c := d.do("POST", "/v1/deliveries", bytes.NewReader(raw), "application/json", &second); c != 409 ||
		!strings.Contains(fmt.Sprint(second), "envelope.parts[1].data.approvalId") {
		t.Fatalf("second file request: %d %v", c, second)
	}
}

func msgBodies(d *devDaemon, to string) []string {
	var out []string
	for _, m := range d.messages().Messages {
		if m.To == to {
			out = append(out, m.Body)
		}
	}
	return out
}
