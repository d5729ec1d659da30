package approvals

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/cool-ai/beachd/envelope"
)

// TestWordsInOtherLanguages: an operator's words decide as the English
// ones do, with the same rules (first word, whole word, ambiguity, opt-out),
// and the English ones still work.
func TestWordsInOtherLanguages(t *testing.T) {
	w, err := NewWords([]string{"ja", "Oui", "sí", "d'accord"}, []string{"nein", "non", "nee"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ text, decision, reason string }{
		{"Ja, gerne", "granted", "gerne"},
		{"NEIN - zu teuer", "denied", "zu teuer"},
		{"Sí.", "granted", ""},
		{"d'accord pour moi", "granted", "pour moi"},
		{"yes", "granted", ""},
		{"oui ou non", "", ""},       // ambiguous
		{"jawohl", "", ""},           // not a whole keyword
		{"Stop ja", "", ""},          // opt-out first
		{"\n nee\nja", "denied", ""}, // only the first non-empty line counts
	} {
		d, r, ok := w.Parse(c.text)
		if d != c.decision || r != c.reason || ok != (c.decision != "") {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", c.text, d, r, ok, c.decision, c.reason)
		}
	}
	// The package default is still English alone.
	if _, _, ok := ParseDecision("ja"); ok {
		t.Error("ParseDecision knows an operator's word")
	}
}

func TestWordsRefused(t *testing.T) {
	_, err := NewWords([]string{"ja bitte", "", "stop"}, []string{"yes", strings.Repeat("x", 41)})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`words.granted[0]: "ja bitte" is not one word`, `words.granted[1]: "" is not one word`,
		`words.granted[2]: "stop" is a carrier opt-out word`, `words.denied[0]: "yes" already means the opposite decision`,
		`words.denied[1]: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" is longer than 40 bytes`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := NewWords(make([]string, 201), nil); err == nil || !strings.Contains(err.Error(), "at most 200") {
		t.Errorf("201 words: %v", err)
	}
}

// TestServiceUsesConfiguredWords: an SMS answered "JA 4821" decides.
func TestServiceUsesConfiguredWords(t *testing.T) {
	w, err := NewWords([]string{"ja"}, []string{"nein"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpt{cfg: func(c *Config) { c.Words = w }})
	env := h.suspend("appr-ja")
	hd := h.handle(h.ingest(env, sms(bob))[0])
	res := h.inbound(envelope.Inbound{Channel: "sms", From: bob, MessageID: "SM1", Text: "JA " + hd.Code + " passt"})
	if res.Outcome != OutcomeDecided || res.Decision != "granted" || res.Reason != "passt" {
		t.Fatalf("result %+v", res)
	}
	checkReceived(t, h, env, "appr-ja", "granted", bob)
}

// TestDecomposedAccents: a reply typed with combining accents (NFD, as some
// keyboards send it) reads as its letters, not as "y" or "n" followed by
// a mark: "Ý tôi là không" ("I mean no") must not approve. An operator's
// word matches however the reply composed it, and scripts that write
// vowels as marks make words.
func TestDecomposedAccents(t *testing.T) {
	nfd := func(s string) string { return norm.NFD.String(s) }
	for _, text := range []string{nfd("Ý tôi là không"), nfd("Ño, gracias"), "Y\u0301 yes"} {
		if d, r, ok := ParseDecision(text); ok {
			t.Errorf("ParseDecision(%q) = %q, %q: a decision", text, d, r)
		}
	}
	w, err := NewWords([]string{"sí", "हाँ", nfd("oké")}, []string{"नहीं"})
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{nfd("Sí, claro"): "granted", "हाँ ठीक है": "granted", "नहीं": "denied", "OKÉ": "granted"} {
		if d, _, ok := w.Parse(text); !ok || d != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", text, d, ok, want)
		}
	}
	_, err = NewWords([]string{"start", "1"}, []string{"help"})
	for _, want := range []string{`words.granted[0]: "start" is a carrier keyword`, `words.granted[1]: "1" has no letter`, `words.denied[0]: "help" is a carrier keyword`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
