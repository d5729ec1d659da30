package email

import "testing"

// TestTrimKeepsOwnText: replies that only look a little like quote headers,
// signatures or separators come through whole.
func TestTrimKeepsOwnText(t *testing.T) {
	for _, in := range []string{
		"Approve. On Monday the team wrote to me about it.",
		"Deny: on 15 Jan we already have a train booked at 10:30.",
		"yes\nOn second thought: only economy.",
		"Approve, at 10:30 is fine.",
		"From: the budget's point of view, yes.",
		"Subject: to approval by Bob.",
		"ok - sent from the office, not my phone",
		"Approve\n\nBest regards,\nAlice Example\nHead of Travel | ACME GmbH\n+49 30 1234567",
		"yes\n\n1. book it\n2. send me the invoice at alice@example.com",
		"Approved 2024-01-15 10:30 by alice@example.com",
		"deny\n\n| Item | Cost |\n|------|------|\n| flight | 420 |",
		"Approve -- but only economy.",
		"Here is my list:\n\n-\nFirst item.\n*\nSecond item.",
	} {
		if got := TrimReply(in); got != in {
			t.Errorf("TrimReply(%q)\n = %q", in, got)
		}
	}
}
