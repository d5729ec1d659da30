package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
)

// maxSubject is RFC 5322's recommended line length; a subject this long
// still fits one header line once encoded words are folded.
const maxSubject = 78

// subjectSourceBytes is how much of the text a default subject is looked
// for in: its first sentence, cut to maxSubject characters anyway.
const subjectSourceBytes = 4 << 10

// Email renders the envelope as one email for in.Recipient.
//
// The subject comes from the kind's subject template (default: the first
// sentence of the text, the surface's title, or a phrase for the kind),
// folded to one line of at most 78 characters, never empty, and ends with
// "[approval:TOKEN]" when the message carries an approval token. The
// Message-ID is <DELIVERYID.TOKEN@DOMAIN> (<DELIVERYID@DOMAIN> without a
// token).
func (r *Renderer) Email(in Input) (*Email, error) {
	c, err := r.build(&in, envelope.ChannelEmail)
	if err != nil {
		return nil, err
	}
	var token, tag string
	for _, a := range c.view.Approvals {
		if a.ByReply {
			token, tag = a.Token, a.SubjectTag
			break
		}
	}
	kind := c.view.Kind
	subj, err := r.tpl.Execute("email/"+kind+".subject", &c.view, r.cfg.TemplateLimits)
	if err != nil {
		return nil, fmt.Errorf("render email subject: %w", err)
	}
	c.view.Subject = finalSubject(subj, tag, kindPhrase(kind))
	lim := r.cfg.TemplateLimits
	if in.Page {
		// A full-message page carries the whole text (up to
		// pageContentBytes): the bound is the templates' own output on
		// top of it.
		lim.MaxBytes = r.templateBytes() + 2*c.viewBytes()
	}
	text, err := r.tpl.Execute("email/"+kind+".txt", &c.view, lim)
	if err != nil {
		return nil, fmt.Errorf("render email text: %w", err)
	}
	html, err := r.tpl.Execute("email/"+kind+".html", &c.view, lim)
	if err != nil {
		return nil, fmt.Errorf("render email html: %w", err)
	}
	msgID := messageID(in, token)
	h := map[string]string{
		"Message-ID":               msgID,
		"Auto-Submitted":           "auto-generated",
		"X-Auto-Response-Suppress": "All",
	}
	if in.Thread != nil {
		if irt := angle(in.Thread.InReplyTo); irt != "" {
			h["In-Reply-To"] = irt
		}
		if refs := references(in.Thread); refs != "" {
			h["References"] = refs
		}
	}
	if rt := replyTo(in.ReplyTo, token); rt != "" {
		h["Reply-To"] = rt
	} else if in.ReplyTo != "" {
		c.warnf("reply-to %q is not an address; left out", in.ReplyTo)
	}
	if len(c.view.Approvals) > 1 && !c.view.NoReplies {
		c.warnf("%d approvals in one email: replies answer the first; the others by link", len(c.view.Approvals))
	}
	return &Email{
		Subject:     c.view.Subject,
		Text:        cleanText(text),
		HTML:        html,
		Attachments: c.attachments,
		Headers:     h,
		MessageID:   msgID,
		Warnings:    c.warnings,
	}, nil
}

// kindPhrase is the subject of last resort.
func kindPhrase(kind string) string {
	switch kind {
	case KindClarification:
		return "A question about your request"
	case KindError:
		return "There was a problem with your request"
	case KindApprovalRequest:
		return "Approval needed"
	case KindApprovalConfirmation:
		return "Decision recorded"
	case KindAlreadyDecided:
		return "Already decided"
	case KindNotUnderstood:
		return "We did not understand your reply"
	}
	return "Your agent's reply"
}

func defaultSubject(c *content) string {
	if c.view.Reminder && c.view.Kind == KindApprovalRequest && len(c.view.Approvals) > 0 {
		return "Reminder: approve: " + c.view.Approvals[0].Summary
	}
	if c.view.Kind == KindApprovalRequest && len(c.view.Approvals) > 0 {
		return "Approve: " + c.view.Approvals[0].Summary
	}
	// The head of the text is enough for a subject, however long the text.
	if s := firstSentence(markdownText(cutSource(c.textSrc, subjectSourceBytes))); s != "" {
		return s
	}
	for _, s := range c.view.Surfaces {
		if s.Title != "" {
			return s.Title
		}
	}
	for _, s := range c.view.Surfaces {
		if s.firstText != "" {
			return s.firstText
		}
	}
	for _, a := range c.view.Artifacts {
		return "File: " + a.Name
	}
	return kindPhrase(c.view.Kind)
}

// firstSentence is the first sentence of the first non-empty line of s,
// without list markers or a final full stop. A very short first sentence
// ("Hello!") is joined by the next ones up to about 20 characters.
func firstSentence(s string) string {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimLeft(line, "-*>#• ")
		if line == "" {
			continue
		}
		cut := 0
		for cut < len(line) {
			next := len(line)
			for _, end := range []string{". ", "! ", "? ", "。", "！", "？"} {
				e := strings.TrimRight(end, " ")
				if i := strings.Index(line[cut:], end); i >= 0 && cut+i+len(e) < next {
					next = cut + i + len(e)
				}
			}
			cut = next
			if utf8.RuneCountInString(line[:cut]) >= 20 {
				break
			}
		}
		out := strings.TrimSpace(line[:cut])
		out = strings.TrimSuffix(out, ".")
		out = strings.TrimSuffix(out, ":")
		if out != "" {
			return out
		}
	}
	return ""
}

// finalSubject folds s to one line within the length budget, falls back to
// fallback when empty (or when its first word alone is over the budget),
// and appends the approval tag, which is never cut.
func finalSubject(s, tag, fallback string) string {
	s = oneLine(s)
	if s == "" {
		s = fallback
	}
	budget := maxSubject
	if tag != "" {
		budget -= utf8.RuneCountInString(tag) + 1
		// The tag must survive even if the user's subject is cut away.
		s = strings.TrimSpace(strings.ReplaceAll(s, tag, ""))
	}
	if cut := cutWords(s, budget); cut != "" || s == "" {
		s = cut
	} else {
		s = cutWords(fallback, budget)
	}
	if tag != "" {
		if s == "" {
			return tag
		}
		return s + " " + tag
	}
	return s
}

// cutWords cuts s to at most n runes, ending in "…", at a break between
// words: never inside a word, a number or an amount ("£1,122", "1 122 €",
// "€ 45"), and without a dangling currency sign or separator at the end.
// It returns "" when not even the first word fits.
func cutWords(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	for i := min(n-1, len(r)-1); i > 0; i-- {
		if !breakAt(r, i) {
			continue
		}
		if head := trimDangling(r[:i]); head != "" {
			return head + "…"
		}
	}
	return ""
}

// trimDangling drops what cannot end a cut subject: spaces, separators
// and opening brackets, and a currency sign that has no amount before it
// ("for £" loses the sign; "901 €" keeps it).
func trimDangling(r []rune) string {
	for len(r) > 0 {
		c := r[len(r)-1]
		switch {
		case unicode.IsSpace(c) || strings.ContainsRune(",;:-–—(/[{&+", c):
		case unicode.Is(unicode.Sc, c):
			j := len(r) - 2
			if j >= 0 && unicode.IsSpace(r[j]) {
				j--
			}
			if j >= 0 && unicode.IsDigit(r[j]) {
				return string(r)
			}
		default:
			return string(r)
		}
		r = r[:len(r)-1]
	}
	return ""
}

// breakAt: r[i] is a space where a line may break — not a no-break space,
// not between two digits (a grouped number), not next to a currency sign
// that belongs to the amount beside it.
func breakAt(r []rune, i int) bool {
	c := r[i]
	if !unicode.IsSpace(c) || c == '\u00a0' || c == '\u202f' || c == '\u2007' {
		return false
	}
	prev, next := r[i-1], rune(0)
	if i+1 < len(r) {
		next = r[i+1]
	}
	switch {
	case unicode.IsDigit(prev) && unicode.IsDigit(next):
		return false
	case unicode.Is(unicode.Sc, prev) && unicode.IsDigit(next):
		return false
	case unicode.IsDigit(prev) && unicode.Is(unicode.Sc, next):
		return false
	}
	return true
}

var reLocalUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]`)

func messageID(in Input, token string) string {
	id := reLocalUnsafe.ReplaceAllString(in.DeliveryID, "-")
	if id == "" {
		b, _ := json.Marshal(in.Envelope)
		sum := sha256.Sum256(append(b, in.Recipient.Address...))
		id = "r" + hex.EncodeToString(sum[:10])
	}
	if len(id) > 64 {
		id = id[:64]
	}
	local := id
	if token != "" {
		local += "." + reLocalUnsafe.ReplaceAllString(token, "")
	}
	return "<" + local + "@" + messageIDDomain(in) + ">"
}

var reDomain = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)

func messageIDDomain(in Input) string {
	if d := strings.TrimSpace(in.MessageIDDomain); reDomain.MatchString(d) {
		return strings.ToLower(d)
	}
	if a, err := mail.ParseAddress(in.From); err == nil {
		if i := strings.LastIndexByte(a.Address, '@'); i >= 0 && reDomain.MatchString(a.Address[i+1:]) {
			return strings.ToLower(a.Address[i+1:])
		}
	}
	return "beachd.invalid"
}

// angle puts a Message-ID in angle brackets, or returns "" for junk.
func angle(id string) string {
	id = strings.TrimSpace(id)
	id = strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">")
	if id == "" || strings.ContainsAny(id, "<> \t\r\n") {
		return ""
	}
	return "<" + id + ">"
}

func references(t *Thread) string {
	var ids []string
	seen := map[string]bool{}
	add := func(s string) {
		if a := angle(s); a != "" && !seen[a] {
			seen[a] = true
			ids = append(ids, a)
		}
	}
	for _, r := range t.References {
		add(r)
	}
	add(t.InReplyTo)
	if len(ids) > 20 { // keep the root and the most recent
		ids = append(ids[:1], ids[len(ids)-19:]...)
	}
	return strings.Join(ids, " ")
}

// replyTo returns base with +token in its local part, formatted as an
// address header value; "" when base is not an address.
func replyTo(base, token string) string {
	if strings.TrimSpace(base) == "" {
		return ""
	}
	a, err := mail.ParseAddress(base)
	if err != nil {
		return ""
	}
	at := strings.LastIndexByte(a.Address, '@')
	if at <= 0 {
		return ""
	}
	local, domain := a.Address[:at], a.Address[at+1:]
	if token != "" && !strings.HasSuffix(local, "+"+token) {
		local += "+" + token
	}
	a.Address = local + "@" + domain
	return a.String()
}

// cleanText trims trailing blanks on each line, folds runs of blank lines
// into one and ends the text with one newline.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	blank := true // drop leading blank lines
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			if blank {
				continue
			}
			blank = true
			out = append(out, "")
			continue
		}
		blank = false
		out = append(out, l)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}
