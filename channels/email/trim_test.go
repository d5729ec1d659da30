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
		// An address, a time and a closing colon on the writer's first
		// line, with no quote after it: not an attribution.
		"Approved for 2024, invoice to billing@example.com by 10:30:\n\n- flight\n- hotel",
		// Rules that are the writer's: a thematic break before prose, a
		// setext heading, a plain-text table's rule, a Markdown table.
		"Yes.\n\n---\n\nOne more thing: the hotel must be near the office, or the taxis add up.",
		"Summary\n-------\n\nApproved, but economy only.",
		"deny\n\nItem      Cost\n--------  ----\nFlight    420\nHotel     300",
		"Costs:\n\nService Expire Date\n-------------------------\nRegistration Jun 27, 2018\nRenewal Jul 27, 2018",
		// Devices named in sentences, and names after dashes that end
		// lists.
		"Approve. I'll check the booking on my iPhone later today.",
		"Approve\n\nSamsung is great",
		"The invoice was sent from my iPhone app to all of you.\n\nThanks",
		"Things to book:\n- Flight\n- Hotel",
		"yes\n\n- Monday\n- Tuesday",
		"Approve\n\n/ Greetings",
		// A banner's words inside the reply are the writer's.
		"Caution: this trip was booked from outside the company portal.",
	} {
		if got := TrimReply(in); got != in {
			t.Errorf("TrimReply(%q)\n = %q", in, got)
		}
	}
}

// TestTrimSignatures: signature markers, client lines and dashed names
// are cut, in the forms seen in the wild.
func TestTrimSignatures(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Yes\n\n--\u00a0\nAlice", "Yes"},
		{"Yes\n\n-- \u00a0\nAlice", "Yes"},
		{"Yes\n\n* * *\nAlice Example\nACME", "Yes"},
		{"Yes\n\n..........\nAlice Example", "Yes"},
		{"Yes\n\n—\nAlice Example\nACME", "Yes"},
		{"Yes\nReply above\n-----------------\nquoted text below the line.", "Yes\nReply above"},
		{"Yes\n\n-Alice", "Yes"},
		{"Yes\n\n/Alice", "Yes"},
		{"Yes\n\nTrimis de pe iPhone-ul meu", "Yes"},
		{"Yes\n\nOdoslané z iPhonu", "Yes"},
		{"Yes\n\nOutlook für iOS beziehen<https://aka.ms/o0ukef>", "Yes"},
		{"Yes\n\niPhone에서 보냄", "Yes"},
		{"Yes\n\nSent wirelessly from my BlackBerry device on the Bell network.", "Yes"},
		{"CAUTION: This email originated from outside of the organization. Do not click links.\n\nYes, approved.", "Yes, approved."},
		{"Yes\n\nDisclaimer\n\nThis message is confidential.", "Yes"},
	} {
		if got := TrimReply(c.in); got != c.want {
			t.Errorf("TrimReply(%q)\n = %q, want %q", c.in, got, c.want)
		}
	}
}
