package render

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
)

// SMS renders the envelope as one SMS for in.Recipient: the response text
// with Markdown stripped, artifact links, and "Reply YES 4821 or NO 4821"
// for each approval. Typographic punctuation is replaced by GSM-7
// look-alikes first, so that a curly apostrophe does not double the price.
//
// A body over the cap (Config.SMSMaxChars, in the encoding's units) is
// either cut (policy truncate: the text, not the approval instructions, ends
// in "..." followed by in.FullMessageURL when given) or split into Parts
// each within the cap (policy split). Segments counts the whole.
func (r *Renderer) SMS(in Input) (*SMS, error) {
	c, err := r.build(&in, envelope.ChannelSMS)
	if err != nil {
		return nil, err
	}
	limit := r.cfg.SMSMaxChars
	// Only the head of a long text can be sent: cut it before the
	// templates run, so that their output stays small whatever the text.
	// A text cut here says where the whole is, as any cut text does.
	if r.cfg.SMSPolicy == SMSSplit {
		if head, cut := precut(c.view.Text, maxSMSParts*limit); cut {
			c.view.Text, c.view.Cut, c.view.MoreURL = head, true, in.FullMessageURL
		}
	} else if head, cut := precut(c.view.Text, 2*limit); cut {
		c.view.Text = head
	}
	name := "sms/" + c.view.Kind + ".txt"
	exec := func() (string, error) {
		out, err := r.tpl.Execute(name, &c.view, r.cfg.TemplateLimits)
		if err != nil {
			return "", fmt.Errorf("render sms: %w", err)
		}
		return smsNormalize(strings.TrimRight(cleanText(out), "\n")), nil
	}
	body, err := exec()
	if err != nil {
		return nil, err
	}
	enc, units, _ := Measure(body)
	out := &SMS{}
	if units > limit {
		switch r.cfg.SMSPolicy {
		case SMSSplit:
			if body, out.Parts, err = r.splitCapped(c, body, enc, limit, in.FullMessageURL, exec); err != nil {
				return nil, err
			}
			out.Truncated = c.view.Cut
		default:
			body, err = r.truncateSMS(c, body, enc, limit, in.FullMessageURL, exec)
			if err != nil {
				return nil, err
			}
			out.Truncated = true
		}
	}
	out.Body = body
	out.Warnings = c.warnings
	if len(out.Parts) > 0 {
		for _, p := range out.Parts {
			e, _, s := Measure(p)
			out.Segments += s
			if e == UCS2 {
				enc = UCS2
			}
		}
		out.Encoding = enc
	} else {
		out.Encoding, _, out.Segments = Measure(body)
	}
	return out, nil
}

// maxSMSParts is the most messages policy split sends for one delivery;
// a longer text is cut, with the link to the whole, as policy truncate
// cuts it.
const maxSMSParts = 10

// precut returns the head of s, cut at a word boundary with "…", when s
// is longer than n characters.
func precut(s string, n int) (string, bool) {
	i, runes := 0, 0
	for i < len(s) && runes <= n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		runes++
	}
	if i >= len(s) {
		return s, false
	}
	return cutWords(s[:i], n), true
}

// splitCapped splits body into parts within limit, and when there would
// be more than maxSMSParts shortens the view's text (ending it with the
// link to the whole) until they fit.
func (r *Renderer) splitCapped(c *content, body, enc string, limit int, moreURL string, exec func() (string, error)) (string, []string, error) {
	parts := splitSMS(body, enc, limit)
	full := c.view.Text
	keep := smsUnits(full, enc)
	for i := 0; i < 4 && len(parts) > maxSMSParts; i++ {
		c.view.Cut, c.view.MoreURL = true, moreURL
		keep -= (len(parts) - maxSMSParts) * limit
		if keep <= 0 {
			c.view.Text = ""
		} else {
			c.view.Text = cutUnits(full, enc, keep) + "..."
		}
		var err error
		if body, err = exec(); err != nil {
			return "", nil, err
		}
		parts = splitSMS(body, enc, limit)
	}
	if len(parts) > maxSMSParts { // what follows the text is itself too long
		parts = append(parts[:maxSMSParts-1], parts[len(parts)-1])
	}
	return body, parts, nil
}

// truncateSMS shortens the view's text until the whole message fits,
// keeping what follows it (links, approval instructions). If even an empty
// text does not fit, the body itself is cut.
func (r *Renderer) truncateSMS(c *content, body, enc string, limit int, moreURL string, exec func() (string, error)) (string, error) {
	c.view.MoreURL = moreURL
	c.view.Cut = true
	full := c.view.Text
	for i := 0; i < 4; i++ {
		over := smsUnits(body, enc) - limit
		if over <= 0 {
			return body, nil
		}
		keep := smsUnits(c.view.Text, enc) - over - 4
		if i == 0 && moreURL != "" {
			keep -= smsUnits("\nFull message: "+moreURL, enc)
		}
		if keep <= 0 {
			c.view.Text = ""
		} else {
			c.view.Text = cutUnits(full, enc, keep) + "..."
		}
		var err error
		if body, err = exec(); err != nil {
			return "", err
		}
	}
	if smsUnits(body, enc) > limit {
		body = cutUnits(body, enc, limit-3) + "..."
	}
	return body, nil
}

// cutUnits cuts s to at most n units of enc, at a word boundary when one is
// near.
func cutUnits(s, enc string, n int) string {
	if n <= 0 {
		return ""
	}
	w := ucs2Width
	if enc == GSM7 {
		w = gsmWidth
	}
	used, end := 0, 0
	for i, r := range s {
		if used+w(r) > n {
			break
		}
		used += w(r)
		_, size := utf8.DecodeRuneInString(s[i:]) // invalid bytes are 1 wide
		end = i + size
	}
	cut := s[:end]
	if end < len(s) {
		if sp := strings.LastIndexAny(cut, " \n"); sp > len(cut)*2/3 {
			cut = cut[:sp]
		}
	}
	return strings.TrimRight(cut, " \n,;:-")
}

// splitSMS cuts body into parts of at most limit units, at line or word
// boundaries when possible.
func splitSMS(body, enc string, limit int) []string {
	var parts []string
	rest := body
	for rest != "" {
		if smsUnits(rest, enc) <= limit {
			parts = append(parts, rest)
			break
		}
		head := cutUnits(rest, enc, limit)
		if head == "" { // a single word longer than the limit
			head = hardCut(rest, enc, limit)
		}
		parts = append(parts, head)
		rest = strings.TrimLeft(rest[len(head):], " \n")
	}
	return parts
}

func hardCut(s, enc string, n int) string {
	w := ucs2Width
	if enc == GSM7 {
		w = gsmWidth
	}
	used := 0
	for i, r := range s {
		if used+w(r) > n {
			return s[:i]
		}
		used += w(r)
	}
	return s
}
