package approvals

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/cool-ai/beachd/envelope"
)

// Decision keywords, matched case-insensitively as whole words: the
// English words of docs/security.md; operators add others (approvals.words).
var (
	grantWords = map[string]bool{"approve": true, "approved": true, "yes": true, "y": true, "ok": true}
	denyWords  = map[string]bool{"deny": true, "denied": true, "reject": true, "rejected": true,
		"no": true, "n": true, "decline": true}
	// optOutWords are carrier opt-out (and opt-in/help) keywords. A reply whose
	// first word is one of them never decides, whatever follows.
	optOutWords = map[string]bool{"stop": true, "stopall": true, "cancel": true,
		"end": true, "quit": true, "unsubscribe": true, "optout": true, "opt-out": true,
		"revoke": true, "arret": true}
	// carrierWords are the carriers' opt-in and help keywords: not
	// decision words, and never an operator's decision word
	// (a "START" sent to resubscribe must not approve anything).
	carrierWords = map[string]bool{"start": true, "unstop": true, "help": true, "info": true}
)

// Words are the decision keywords a Service understands: the English ones
// above and any an operator adds for the languages its recipients
// answer in (approvals.words).
type Words struct {
	grant, deny map[string]bool
}

// maxExtraWords bounds approvals.words.
const maxExtraWords = 200

// NewWords adds grant and deny words to the English keywords. Each must be
// one word as replies are split (letters, digits, inner apostrophes,
// hyphens, underscores), of at most 40 bytes, and may be neither a carrier
// opt-out word nor a keyword of the other kind.
func NewWords(grant, deny []string) (*Words, error) {
	if len(grant)+len(deny) > maxExtraWords {
		return nil, fmt.Errorf("approvals: words: %d words; at most %d", len(grant)+len(deny), maxExtraWords)
	}
	w := &Words{grant: map[string]bool{}, deny: map[string]bool{}}
	for k := range grantWords {
		w.grant[k] = true
	}
	for k := range denyWords {
		w.deny[k] = true
	}
	var errs []error
	add := func(list string, words []string, into, other map[string]bool) {
		for i, x := range words {
			lw := strings.ToLower(norm.NFC.String(strings.TrimSpace(x)))
			ws := splitWords(lw)
			switch {
			case lw == "" || len(ws) != 1 || ws[0].w != lw:
				errs = append(errs, fmt.Errorf("approvals: words.%s[%d]: %q is not one word", list, i, x))
			case len(lw) > 40:
				errs = append(errs, fmt.Errorf("approvals: words.%s[%d]: %q is longer than 40 bytes", list, i, x))
			case !strings.ContainsFunc(lw, unicode.IsLetter):
				errs = append(errs, fmt.Errorf("approvals: words.%s[%d]: %q has no letter (an SMS code could read as it)", list, i, x))
			case optOutWords[lw]:
				errs = append(errs, fmt.Errorf("approvals: words.%s[%d]: %q is a carrier opt-out word, never a decision", list, i, x))
			case carrierWords[lw]:
				errs = append(errs, fmt.Errorf("approvals: words.%s[%d]: %q is a carrier keyword (opt-in or help), never a decision", list, i, x))
			case other[lw]:
				errs = append(errs, fmt.Errorf("approvals: words.%s[%d]: %q already means the opposite decision", list, i, x))
			default:
				into[lw] = true
			}
		}
	}
	add("granted", grant, w.grant, w.deny)
	add("denied", deny, w.deny, w.grant)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}

// englishWords are the built-in English keywords alone.
var englishWords = &Words{grant: grantWords, deny: denyWords}

// EnglishWords returns the built-in English keywords alone.
func EnglishWords() *Words { return englishWords }

// maxDecisionLine bounds the line ParseDecision looks at; longer input is
// truncated (a decision is a short answer).
const maxDecisionLine = 1000

// ParseDecision reads a decision from reply text under the rules of
// docs/security.md. Only the first non-empty line (after trimming) counts; a
// decision further down a reply (a quoted "Reply YES or NO" line, for
// instance) never does. The line's first word, matched case-insensitively as
// a whole word, must be a keyword: approve, approved, yes, y, ok → granted;
// deny, denied, reject, rejected, no, n, decline → denied. The rest of the
// line is the reason ("no - too expensive" → denied, "too expensive").
//
// No decision (ok=false) when: the text is empty; the first word is not a
// keyword ("I think so", "not approved", "don't approve"); the first word is
// a carrier opt-out word (STOP, STOPALL, CANCEL, END, QUIT, UNSUBSCRIBE,
// OPTOUT, REVOKE); or the line is ambiguous — a keyword of the other kind
// appears within the next three words ("yes or no", "Y/N", "approve deny").
// A keyword of the other kind later in the line is part of the reason
// ("yes, keep it under 500 and no more").
//
// Words are runs of letters, digits, apostrophes, hyphens and underscores;
// punctuation around them ("Yes." "OK!" "no,") is ignored. An SMS code
// ("YES 4821") is left at the start of the reason: the caller (the Service)
// strips the code it matched — ParseDecision knows nothing of codes.
func ParseDecision(text string) (decision, reason string, ok bool) {
	return englishWords.Parse(text)
}

// Parse is ParseDecision with w's keywords.
func (w *Words) Parse(text string) (decision, reason string, ok bool) {
	words := splitWords(firstLine(text))
	if len(words) == 0 {
		return "", "", false
	}
	keyword := w.keyword
	d := keyword(words[0].w)
	if d == "" {
		return "", "", false
	}
	end := words[0].end
	for i := 1; i < len(words) && i <= ambiguityWindow; i++ {
		switch k := keyword(words[i].w); {
		case k == "":
		case k != d:
			return "", "", false
		case i == 1 || end == words[i-1].end:
			end = words[i].end // "yes ok", "no no": the run of agreeing keywords
		}
	}
	line := firstLine(text)
	return d, cleanReason(line[end:]), true
}

// ambiguityWindow is how many words after the first a keyword of the other
// kind makes the line ambiguous.
const ambiguityWindow = 3

func (w *Words) keyword(word string) string {
	lw := strings.ToLower(word)
	switch {
	case w.grant[lw]:
		return envelope.DecisionGranted
	case w.deny[lw]:
		return envelope.DecisionDenied
	}
	return ""
}

// IsOptOut reports whether text is a carrier opt-out message (its first word
// is an opt-out keyword). Channels use it to record opt-outs; ParseDecision
// never decides on such text.
func IsOptOut(text string) bool {
	words := splitWords(firstLine(text))
	return len(words) > 0 && optOutWords[strings.ToLower(words[0].w)]
}

func firstLine(text string) string {
	for line := range strings.FieldsFuncSeq(text, isLineBreak) {
		line = strings.TrimFunc(line, unicode.IsSpace)
		if line == "" {
			continue
		}
		if len(line) > maxDecisionLine {
			line = line[:maxDecisionLine]
			for !utf8.ValidString(line) {
				line = line[:len(line)-1]
			}
		}
		// Composed form: "Ý" typed as Y and a combining accent is one
		// letter, not a "y" (yes) followed by a mark.
		return norm.NFC.String(line)
	}
	return ""
}

func isLineBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x85 || r == 0x2028 || r == 0x2029
}

type word struct {
	w   string
	end int // byte offset just past the word
}

func isWordRune(r rune) bool {
	// Marks belong to the letter they follow (scripts such as Devanagari
	// and Thai write vowels as marks, and a mark NFC cannot compose stays).
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || r == '\'' || r == '-' || r == '_'
}

func splitWords(line string) []word {
	var out []word
	start := -1
	for i, r := range line {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, word{w: strings.Trim(line[start:i], "'-_"), end: i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, word{w: strings.Trim(line[start:], "'-_"), end: len(line)})
	}
	return out
}

// cleanReason trims separators left between the keyword and the reason
// ("yes - go ahead", "no: too expensive", "approved, thanks").
func cleanReason(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(".,;:!-–—", r)
	})
}
