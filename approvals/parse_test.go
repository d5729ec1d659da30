package approvals

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseDecision(t *testing.T) {
	tests := []struct {
		in       string
		decision string
		reason   string
		ok       bool
	}{
		{"yes", "granted", "", true},
		{"Yes", "granted", "", true},
		{"YES.", "granted", "", true},
		{"  \n\n  approve  \n", "granted", "", true},
		{"Approved - go ahead", "granted", "go ahead", true},
		{"ok!", "granted", "", true},
		{"OK, thanks", "granted", "thanks", true},
		{"y", "granted", "", true},
		{"Y", "granted", "", true},
		{"yes ok", "granted", "", true},
		{"YES 4821", "granted", "4821", true},
		{"yes, keep it under 500 and no more", "granted", "keep it under 500 and no more", true},
		{"yes, but no more than 500", "", "", false}, // a keyword of the other kind too close: ambiguous
		{"no", "denied", "", true},
		{"No: too expensive", "denied", "too expensive", true},
		{"n", "denied", "", true},
		{"deny", "denied", "", true},
		{"Denied.", "denied", "", true},
		{"reject — wrong dates", "denied", "wrong dates", true},
		{"rejected", "denied", "", true},
		{"decline", "denied", "", true},
		{"NO 123456", "denied", "123456", true},
		{"no no no", "denied", "", true},
		{"no\nyes", "denied", "", true},                        // only the first line counts
		{"\r\n\tno thanks\r\n> yes", "denied", "thanks", true}, // CRLF
		// No decision.
		{"", "", "", false},
		{"   \n \t\n", "", "", false},
		{"yes or no", "", "", false},
		{"Y/N", "", "", false},
		{"approve deny", "", "", false},
		{"no, yes", "", "", false},
		{"not approved", "", "", false},
		{"don't approve", "", "", false},
		{"I think so", "", "", false},
		{"yesterday", "", "", false}, // whole words only
		{"okay", "", "", false},
		{"nope", "", "", false},
		{"noted", "", "", false},
		{"STOP", "", "", false},
		{"stop yes", "", "", false},
		{"STOPALL", "", "", false},
		{"CANCEL", "", "", false},
		{"End", "", "", false},
		{"quit", "", "", false},
		{"UNSUBSCRIBE", "", "", false},
		{"optout", "", "", false},
		{"[approval:abcdefghijklmnopqrstuvwxyz]", "", "", false}, // a token identifies, never decides
		{"Please see below\nyes", "", "", false},
	}
	for _, tc := range tests {
		d, r, ok := ParseDecision(tc.in)
		if d != tc.decision || r != tc.reason || ok != tc.ok {
			t.Errorf("ParseDecision(%q) = (%q, %q, %v), want (%q, %q, %v)", tc.in, d, r, ok, tc.decision, tc.reason, tc.ok)
		}
	}
}

func TestIsOptOut(t *testing.T) {
	for in, want := range map[string]bool{"STOP": true, "stop please": true, "Unsubscribe": true,
		"yes": false, "": false, "stopped": false, "QUIT": true} {
		if got := IsOptOut(in); got != want {
			t.Errorf("IsOptOut(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzParseDecision(f *testing.F) {
	for _, s := range []string{"yes", "No: too expensive", "yes or no", "STOP", "", "\n\nY 4821\n", "ok—fine", "\xff\xfeyes"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, r, ok := ParseDecision(in)
		if !ok {
			if d != "" || r != "" {
				t.Fatalf("no decision but (%q, %q)", d, r)
			}
			return
		}
		if d != "granted" && d != "denied" {
			t.Fatalf("decision %q", d)
		}
		if strings.ContainsAny(r, "\r\n") {
			t.Fatalf("reason spans lines: %q", r)
		}
		if utf8.ValidString(in) && !utf8.ValidString(r) {
			t.Fatalf("reason not valid UTF-8: %q", r)
		}
		if len(r) > maxDecisionLine {
			t.Fatalf("reason too long: %d", len(r))
		}
		if IsOptOut(in) {
			t.Fatalf("opt-out %q decided %s", in, d)
		}
		// Deterministic.
		d2, r2, ok2 := ParseDecision(in)
		if d2 != d || r2 != r || ok2 != ok {
			t.Fatal("not deterministic")
		}
	})
}
