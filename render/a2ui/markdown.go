package a2ui

import (
	"html"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The catalog allows "simple Markdown" in Text: emphasis, code, and (though
// discouraged) headings, lists and links. This is a small, forgiving reader
// of that subset; anything it does not recognise is shown literally.

type span struct {
	text                       string
	bold, italic, code, strike bool
	href                       string
}

var (
	mdHeading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+`)
	mdBullet  = regexp.MustCompile(`^(\s*)[-*+]\s+`)
	mdQuote   = regexp.MustCompile(`^\s{0,3}>\s?`)
)

// mdLines splits s into lines with block markers (headings, bullets,
// quotes) rewritten, and each line into inline spans.
func mdLines(s string) [][]span {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	out := make([][]span, 0, len(lines))
	for _, l := range lines {
		l = mdHeading.ReplaceAllString(l, "")
		l = mdQuote.ReplaceAllString(l, "")
		if mdBullet.MatchString(l) && !strings.HasPrefix(strings.TrimSpace(l), "**") {
			l = mdBullet.ReplaceAllString(l, "$1• ")
		}
		out = append(out, mdInline(l))
	}
	return out
}

// linkWindow bounds how far a link's "](" and ")" are looked for.
const linkWindow = 2048

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func mdInline(s string) []span {
	var out []span
	var cur span
	var buf strings.Builder
	flush := func() {
		if buf.Len() > 0 {
			cur.text = buf.String()
			out = append(out, cur)
			buf.Reset()
		}
	}
	prevRune := func(i int) rune {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		return r
	}
	nextRune := func(i int) rune {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return r
	}
	// Where each closing marker last occurs, so that "is there a closer
	// later?" costs O(1) and long strings stay linear.
	lastBold := map[byte]int{'*': strings.LastIndex(s, "**"), '_': strings.LastIndex(s, "__")}
	lastStrike := strings.LastIndex(s, "~~")
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\\`*_~[]()#+-.!>", s[i+1]) >= 0:
			buf.WriteByte(s[i+1])
			i += 2
			continue
		case c == '`':
			if j := strings.IndexByte(s[i+1:], '`'); j > 0 {
				flush()
				out = append(out, span{text: s[i+1 : i+1+j], code: true})
				i += j + 2
				continue
			}
		case (c == '*' || c == '_') && strings.HasPrefix(s[i:], string([]byte{c, c})):
			if cur.bold {
				flush()
				cur.bold = false
				i += 2
				continue
			}
			if lastBold[c] >= i+2 && i+2 < len(s) && s[i+2] != ' ' {
				flush()
				cur.bold = true
				i += 2
				continue
			}
		case c == '~' && strings.HasPrefix(s[i:], "~~"):
			if cur.strike {
				flush()
				cur.strike = false
				i += 2
				continue
			}
			if lastStrike >= i+2 {
				flush()
				cur.strike = true
				i += 2
				continue
			}
		case c == '*' || c == '_':
			if cur.italic {
				if c == '*' || !isWordRune(nextRune(i+1)) {
					flush()
					cur.italic = false
					i++
					continue
				}
			} else if i+1 < len(s) && s[i+1] != ' ' && strings.IndexByte(s[i+1:], c) > 0 &&
				(c == '*' || i == 0 || !isWordRune(prevRune(i))) {
				flush()
				cur.italic = true
				i++
				continue
			}
		case c == '[':
			if j := strings.Index(s[i:min(len(s), i+linkWindow)], "]("); j > 0 {
				if k := strings.IndexByte(s[i+j+2:min(len(s), i+j+2+linkWindow)], ')'); k >= 0 {
					flush()
					sp := cur
					sp.text = s[i+1 : i+j]
					sp.href = strings.TrimSpace(s[i+j+2 : i+j+2+k])
					out = append(out, sp)
					i += j + 2 + k + 1
					continue
				}
			}
		}
		buf.WriteByte(c)
		i++
	}
	flush()
	return out
}

// plainMarkdown is s with Markdown markers removed; links read
// "text (url)".
func plainMarkdown(s string) string {
	if !strings.ContainsAny(s, "*_`~[#>-+\\") {
		return s
	}
	var b strings.Builder
	for i, line := range mdLines(s) {
		if i > 0 {
			b.WriteByte('\n')
		}
		for _, sp := range line {
			b.WriteString(sp.text)
			if sp.href != "" && sp.href != sp.text && linkOK(sp.href) {
				b.WriteString(" (" + sp.href + ")")
			}
		}
	}
	return b.String()
}

func linkOK(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return u.Host != ""
	case "mailto":
		return true
	}
	return false
}

// markdownHTML renders s as escaped inline HTML; lines are joined by <br>.
// visible receives the plain text of each line, as shown. It stops once
// the HTML is over limit bytes (markup can be many times the text: a
// one-character code span is some ninety bytes), as the caller could not
// use more.
func markdownHTML(s string, visible func(string), limit int) string {
	var b strings.Builder
	for i, line := range mdLines(s) {
		if b.Len() > limit {
			break
		}
		if i > 0 {
			b.WriteString("<br>")
		}
		var plain strings.Builder
		for _, sp := range line {
			t := html.EscapeString(sp.text)
			plain.WriteString(sp.text)
			if sp.code {
				t = `<code style="font-family:Consolas,Menlo,monospace;background:#f1f3f4;padding:0 2px">` + t + `</code>`
			}
			if sp.strike {
				t = "<s>" + t + "</s>"
			}
			if sp.italic {
				t = "<em>" + t + "</em>"
			}
			if sp.bold {
				t = "<strong>" + t + "</strong>"
			}
			if sp.href != "" && linkOK(sp.href) {
				t = `<a href="` + html.EscapeString(sp.href) + `" style="color:#1a73e8">` + t + `</a>`
			}
			b.WriteString(t)
			if b.Len() > limit {
				break
			}
		}
		if visible != nil {
			visible(plain.String())
		}
	}
	return b.String()
}
