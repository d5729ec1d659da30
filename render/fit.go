package render

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cool-ai/beachd/templates"
)

// What one email may carry. The templates' output bound
// (Config.TemplateLimits.MaxBytes, 1 MiB by default) is shared: its
// surfaces take at most half of it less a reserve for the templates' own
// text, and the response text the rest, each of text and HTML. A
// full-message page (Input.Page) shows up to pageContentBytes, and its
// template bound grows by what it carries.
const (
	contentReserve   = 64 << 10
	pageContentBytes = 4 << 20
)

// contentBound is what the text and surfaces of one rendition may take,
// in each of its text and HTML.
func (r *Renderer) contentBound(page bool) int {
	if page {
		return pageContentBytes
	}
	l := r.templateBytes()
	return max(l-contentReserve, l/2)
}

func (r *Renderer) templateBytes() int {
	if r.cfg.TemplateLimits.MaxBytes > 0 {
		return r.cfg.TemplateLimits.MaxBytes
	}
	return templates.DefaultLimits.MaxBytes
}

// fitText renders Markdown-ish src as plain text and HTML, each within
// limit bytes: the whole when it fits, else the longest head found in a
// few tries, cut at a paragraph, line or word boundary. shown is how many
// bytes of src the head holds (len(src) when nothing was cut). Each try
// costs O(limit) whatever the length of src.
func fitText(src string, limit int) (text, html string, shown int) {
	n := min(len(src), limit)
	for try := 0; ; try++ {
		head := src
		if n < len(src) {
			head = cutSource(src, n)
		}
		text = markdownText(head)
		html = markdownHTMLWithin(head, limit)
		if len(text) <= limit && len(html) <= limit {
			return text, html, len(head)
		}
		if try == 20 || n == 0 {
			return "", "", 0
		}
		// Markup grows with its source: shrink in proportion, with a
		// margin, and by half at least when the HTML stopped at the bound
		// (it then says only that it is at least that long).
		grow := float64(max(len(html), len(text))) / float64(max(len(head), 1))
		next := int(float64(limit) / grow * 0.9)
		if len(html) > limit {
			next = min(next, n/2)
		}
		n = min(next, n-1)
	}
}

// cutSource returns a head of src of at most n bytes, ending at a
// paragraph break, else a line break, else a space, when one is in its
// last third, and never inside a UTF-8 sequence. A src of at most n bytes
// is returned whole.
func cutSource(src string, n int) string {
	if n >= len(src) {
		return src
	}
	for n > 0 && n < len(src) && !utf8.RuneStart(src[n]) {
		n--
	}
	head := src[:n]
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(head, sep); i > len(head)*2/3 {
			return strings.TrimRight(head[:i], " \n")
		}
	}
	return head
}

// cutNote ends a text that was cut: where the whole is, or how much is
// missing.
func cutNote(moreURL string, missing int) string {
	if moreURL != "" {
		return "… The rest of this message: " + moreURL
	}
	return fmt.Sprintf("… %d more characters are not shown: the message is longer than one email may be.", missing)
}

// viewBytes is what the text and surfaces of a view hold, text and HTML.
func (c *content) viewBytes() int {
	n := len(c.view.Text) + len(c.view.HTML)
	for _, s := range c.view.Surfaces {
		n += len(s.Text) + len(s.HTML)
	}
	return n
}
