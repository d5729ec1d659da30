package render

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestSubjectCut: a subject cut to fit keeps whole words and whole amounts,
// never ends on a dangling currency sign or separator, and keeps the
// approval tag intact.
func TestSubjectCut(t *testing.T) {
	tag := "[approval:k7n3q2m5x4p6r8t2v4w6y3z5ab]"
	for _, tc := range []struct {
		in, tag, want string
	}{
		// The budget left beside the tag is 40 runes.
		{"Approve: Approve charge of £1,122.00 to card ending 4242", tag, "Approve: Approve charge of £1,122.00 to…"},
		{"Approve: charge £1,122,000.00 to AccommodationReservations", tag, "Approve: charge £1,122,000.00 to…"},
		{"Approve: Charge of £1,122,000,000,000,000.00 now please", tag, "Approve: Charge of…"},
		{"Approve: Book BA2043 (LGW→CFU, 15 Aug) for 6 people, £1,122 total", tag, "Approve: Book BA2043 (LGW→CFU, 15 Aug)…"},
		{"Approve: pay the supplier for flights, £ 1,122 due", tag, "Approve: pay the supplier for flights…"},
		{"Approve: le paiement de 1 122 € pour 6 personnes", tag, "Approve: le paiement de 1 122 € pour 6…"},
		{"Approve: paiement de 12 345 678 901 € pour six personnes", tag, "Approve: paiement de 12 345 678 901 €…"},
		{"Approve: paiement de 12 345 678 901 234 567 € pour six personnes", tag, "Approve: paiement de…"},
		{"Approve: pay 1\u00a0122\u00a0€ to the travel agency", tag, "Approve: pay 1 122 € to the travel…"},
		{"Approve: flights, hotels, cars, trains, and the ferry", tag, "Approve: flights, hotels, cars, trains…"},
		// One word longer than the budget: the fallback, not half a word.
		{"Approve:" + strings.Repeat("x", 60), tag, "Approval needed"},
		{strings.Repeat("y", 100), "", "Approval needed"},
		// Fits: untouched.
		{"Approve: Book BA2043 for £1,122", tag, "Approve: Book BA2043 for £1,122"},
		{"", tag, "Approval needed"},
	} {
		got := finalSubject(tc.in, tc.tag, "Approval needed")
		want := tc.want
		if tc.tag != "" {
			want += " " + tc.tag
		}
		if got != want {
			t.Errorf("finalSubject(%q)\n got %q\nwant %q", tc.in, got, want)
		}
		if n := utf8.RuneCountInString(got); n > maxSubject {
			t.Errorf("%q: %d runes, over %d", got, n, maxSubject)
		}
		if tc.tag != "" && !strings.HasSuffix(got, " "+tc.tag) {
			t.Errorf("%q: tag not intact", got)
		}
	}
}

// FuzzSubjectCut: whatever the text, the subject fits, is valid UTF-8,
// keeps the tag whole, and a cut never splits a word of the input.
func FuzzSubjectCut(f *testing.F) {
	for _, s := range []string{"Approve charge of £1,122.00 to card ending 4242 for flights LHR-JFK", "1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5", "€ € € €", ""} {
		f.Add(s)
	}
	tag := "[approval:k7n3q2m5x4p6r8t2v4w6y3z5ab]"
	f.Fuzz(func(t *testing.T, s string) {
		got := finalSubject(s, tag, "Approval needed")
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > maxSubject || !strings.HasSuffix(got, tag) {
			t.Fatalf("%q → %q", s, got)
		}
		head := strings.TrimSuffix(strings.TrimSuffix(got, tag), " ")
		if !strings.HasSuffix(head, "…") {
			return
		}
		head = strings.TrimSuffix(head, "…")
		words := strings.Fields(head)
		if len(words) == 0 {
			t.Fatalf("%q → %q: empty cut", s, got)
		}
		// The last kept word (less trimmed punctuation) is a whole word
		// of the input.
		last := words[len(words)-1]
		found := false
		for _, w := range strings.Fields(oneLine(s)) {
			if strings.HasPrefix(w, last) && (w == last || strings.TrimFunc(w[len(last):], dangling) == "" || !isWordRune(w[len(last):])) {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("%q → %q: %q is not a whole word of the input", s, got, last)
		}
	})
}

// dangling is what a cut may drop from the end of its last word:
// separators, opening brackets and currency signs without an amount.
func dangling(r rune) bool {
	return strings.ContainsRune(",;:-–—(/[{&+", r) || unicode.Is(unicode.Sc, r)
}

func isWordRune(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r != utf8.RuneError && (r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || r > 127)
}
