package render

import (
	"html"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// The agent's response, clarify and error texts are "Markdown-ish": what an
// LLM writes when told to be brief. We understand paragraphs (single line
// breaks kept), headings, bullet and numbered lists, quotes, fenced code,
// rules, **bold**, *italic*, `code`, [links](https://…), <https://…> and bare
// URLs, and render them to plain text (markers removed, links spelled out)
// and to email-safe HTML (inline styles, everything escaped, only http,
// https and mailto links). Anything else is text.

type blockKind int

const (
	bPara blockKind = iota
	bHeading
	bBullets
	bNumbers
	bQuote
	bCode
	bRule
)

type mdBlock struct {
	kind  blockKind
	level int      // heading level
	lines []string // paragraph/quote/code lines; one entry per list item
	start string   // first number of a numbered list
}

var (
	reHeading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	reBullet  = regexp.MustCompile(`^\s{0,3}[-*+•]\s+(.*)$`)
	reNumber  = regexp.MustCompile(`^\s{0,3}(\d{1,9})[.)]\s+(.*)$`)
	reQuote   = regexp.MustCompile(`^\s{0,3}>\s?(.*)$`)
	reRule    = regexp.MustCompile(`^\s{0,3}(?:(?:-\s*){3,}|(?:\*\s*){3,}|(?:_\s*){3,})$`)
	reFence   = regexp.MustCompile("^\\s{0,3}(```|~~~)")
)

func parseBlocks(src string) []mdBlock {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	lines := strings.Split(src, "\n")
	var out []mdBlock
	var cur *mdBlock
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		ln := strings.TrimRight(lines[i], " \t")
		if m := reFence.FindStringSubmatch(ln); m != nil {
			flush()
			b := mdBlock{kind: bCode}
			for i++; i < len(lines); i++ {
				if strings.HasPrefix(strings.TrimSpace(lines[i]), m[1]) {
					break
				}
				b.lines = append(b.lines, strings.TrimRight(lines[i], " \t"))
			}
			out = append(out, b)
			continue
		}
		if strings.TrimSpace(ln) == "" {
			flush()
			continue
		}
		if reRule.MatchString(ln) && (cur == nil || cur.kind != bPara) {
			flush()
			out = append(out, mdBlock{kind: bRule})
			continue
		}
		if m := reHeading.FindStringSubmatch(ln); m != nil {
			flush()
			out = append(out, mdBlock{kind: bHeading, level: len(m[1]), lines: []string{m[2]}})
			continue
		}
		if m := reBullet.FindStringSubmatch(ln); m != nil {
			if cur == nil || cur.kind != bBullets {
				flush()
				cur = &mdBlock{kind: bBullets}
			}
			cur.lines = append(cur.lines, m[1])
			continue
		}
		if m := reNumber.FindStringSubmatch(ln); m != nil {
			if cur == nil || cur.kind != bNumbers {
				flush()
				cur = &mdBlock{kind: bNumbers, start: m[1]}
			}
			cur.lines = append(cur.lines, m[2])
			continue
		}
		if m := reQuote.FindStringSubmatch(ln); m != nil {
			if cur == nil || cur.kind != bQuote {
				flush()
				cur = &mdBlock{kind: bQuote}
			}
			cur.lines = append(cur.lines, m[1])
			continue
		}
		if cur != nil && (cur.kind == bBullets || cur.kind == bNumbers) && (strings.HasPrefix(ln, " ") || strings.HasPrefix(ln, "\t")) {
			// continuation of a list item
			cur.lines[len(cur.lines)-1] += " " + strings.TrimSpace(ln)
			continue
		}
		if cur == nil || cur.kind != bPara {
			flush()
			cur = &mdBlock{kind: bPara}
		}
		cur.lines = append(cur.lines, strings.TrimSpace(ln))
	}
	flush()
	return out
}

// Inline spans.
type spanKind int

const (
	sText spanKind = iota
	sBold
	sItalic
	sCode
	sLink
)

type span struct {
	kind spanKind
	text string
	url  string
	kids []span // bold and italic contents
}

var reBareURL = regexp.MustCompile(`^https?://[^\s<>"]+`)

// parseInline splits one line of Markdown-ish text into spans.
func parseInline(s string) []span { return parseInlineDepth(s, 0) }

func parseInlineDepth(s string, depth int) []span {
	var out []span
	eachInline(s, depth, func(sp span) bool {
		out = append(out, sp)
		return true
	})
	return out
}

// linkWindow bounds how far a link's "](", ")" or ">" is looked for, so
// that a line of unclosed brackets costs linear time.
const linkWindow = 2048

// eachInline gives the spans of one line, in order, to yield until it
// returns false: a renderer that can use only so much stops the parse
// there, and a long line is never held as spans.
func eachInline(s string, depth int, yield func(span) bool) {
	var text strings.Builder
	stopped := false
	emit := func(sp span) {
		if text.Len() > 0 {
			stopped = stopped || !yield(span{kind: sText, text: text.String()})
			text.Reset()
		}
		stopped = stopped || !yield(sp)
	}
	for i := 0; i < len(s) && !stopped; {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\\`*_[]()<>#+-.!", s[i+1]) >= 0:
			text.WriteByte(s[i+1])
			i += 2
			continue
		case c == '`':
			if j := strings.IndexByte(s[i+1:], '`'); j >= 0 {
				emit(span{kind: sCode, text: s[i+1 : i+1+j]})
				i += j + 2
				continue
			}
		case (c == '*' || c == '_') && i+1 < len(s) && s[i+1] == c && depth < 4:
			marker := s[i : i+2]
			if j := strings.Index(s[i+2:], marker); j > 0 && s[i+2] != ' ' {
				emit(span{kind: sBold, kids: parseInlineDepth(s[i+2:i+2+j], depth+1)})
				i += j + 4
				continue
			}
		case (c == '*' || c == '_') && depth < 4 && i+1 < len(s) && s[i+1] != ' ' && s[i+1] != c &&
			(c == '*' || i == 0 || !isWordByte(s[i-1])):
			if j := strings.IndexByte(s[i+1:], c); j > 0 && s[i+j] != ' ' &&
				(c == '*' || i+j+2 >= len(s) || !isWordByte(s[i+j+2])) {
				emit(span{kind: sItalic, kids: parseInlineDepth(s[i+1:i+1+j], depth+1)})
				i += j + 2
				continue
			}
		case c == '[':
			if close := strings.Index(s[i:min(len(s), i+linkWindow)], "]("); close > 0 {
				rest := s[i+close+2:]
				if end := strings.IndexByte(rest[:min(len(rest), linkWindow)], ')'); end >= 0 {
					label, target := s[i+1:i+close], strings.TrimSpace(rest[:end])
					if safeURL(target) {
						emit(span{kind: sLink, text: label, url: target})
						i += close + 2 + end + 1
						continue
					}
				}
			}
		case c == '<':
			if end := strings.IndexByte(s[i:min(len(s), i+linkWindow)], '>'); end > 0 {
				target := s[i+1 : i+end]
				if safeURL(target) && !strings.ContainsAny(target, " \t") {
					emit(span{kind: sLink, text: target, url: target})
					i += end + 1
					continue
				}
			}
		case c == 'h' && (i == 0 || !isWordByte(s[i-1])):
			if m := reBareURL.FindString(s[i:]); m != "" {
				m = strings.TrimRight(m, ".,;:!?'")
				if strings.HasSuffix(m, ")") && strings.Count(m, "(") < strings.Count(m, ")") {
					m = m[:len(m)-1]
				}
				emit(span{kind: sLink, text: m, url: m})
				i += len(m)
				continue
			}
		}
		text.WriteByte(c)
		i++
	}
	if text.Len() > 0 && !stopped {
		yield(span{kind: sText, text: text.String()})
	}
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

// safeURL admits only absolute http(s) and mailto links into HTML.
func safeURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return u.Host != ""
	case "mailto":
		return u.Opaque != ""
	}
	return false
}

// lineStyled renders one line of Markdown-ish text as text.
func lineStyled(line string, wa bool) string {
	var b strings.Builder
	eachInline(line, 0, func(s span) bool {
		writeStyled(&b, s, wa)
		return true
	})
	return b.String()
}

// inlineStyled renders spans as text; wa selects WhatsApp's own markup
// (*bold*, _italic_, ```code```).
func inlineStyled(sp []span, wa bool) string {
	var b strings.Builder
	for _, s := range sp {
		writeStyled(&b, s, wa)
	}
	return b.String()
}

func writeStyled(b *strings.Builder, s span, wa bool) {
	switch s.kind {
	case sText:
		b.WriteString(s.text)
	case sCode:
		if wa && strings.TrimSpace(s.text) != "" {
			b.WriteString("```" + s.text + "```")
		} else {
			b.WriteString(s.text)
		}
	case sBold, sItalic:
		inner := inlineStyled(s.kids, wa)
		if wa && strings.TrimSpace(inner) != "" && !strings.ContainsAny(inner, "*_") {
			m := "*"
			if s.kind == sItalic {
				m = "_"
			}
			inner = m + inner + m
		}
		b.WriteString(inner)
	case sLink:
		label := strings.TrimSpace(s.text)
		u := strings.TrimPrefix(s.url, "mailto:")
		if label == "" || label == s.url || label == u {
			b.WriteString(s.url)
		} else {
			b.WriteString(label + " (" + u + ")")
		}
	}
}

const linkStyle = `color:#1d4ed8;text-decoration:underline;`

// lineHTML renders one line of Markdown-ish text as HTML, stopping the
// parse between spans once past limit bytes (limit < 0: no bound).
func lineHTML(line string, limit int) string {
	var b strings.Builder
	eachInline(line, 0, func(s span) bool {
		writeHTML(&b, s)
		return limit < 0 || b.Len() <= limit
	})
	return b.String()
}

// inlineHTML renders spans as HTML.
func inlineHTML(sp []span) string {
	var b strings.Builder
	for _, s := range sp {
		writeHTML(&b, s)
	}
	return b.String()
}

func writeHTML(b *strings.Builder, s span) {
	switch s.kind {
	case sText:
		b.WriteString(html.EscapeString(s.text))
	case sCode:
		b.WriteString(`<code style="font-family:Menlo,Consolas,monospace;font-size:90%;background:#f4f4f5;padding:1px 4px;border-radius:3px;">` + html.EscapeString(s.text) + `</code>`)
	case sBold:
		b.WriteString("<strong>" + inlineHTML(s.kids) + "</strong>")
	case sItalic:
		b.WriteString("<em>" + inlineHTML(s.kids) + "</em>")
	case sLink:
		label := s.text
		if strings.TrimSpace(label) == "" {
			label = s.url
		}
		b.WriteString(`<a href="` + html.EscapeString(s.url) + `" style="` + linkStyle + `">` + html.EscapeString(label) + `</a>`)
	}
}

// markdownText renders Markdown-ish src as plain text.
func markdownText(src string) string { return markdownStyled(src, false) }

// markdownWhatsApp renders Markdown-ish src as WhatsApp text.
func markdownWhatsApp(src string) string { return markdownStyled(src, true) }

func markdownStyled(src string, wa bool) string {
	var parts []string
	for _, b := range parseBlocks(src) {
		var s strings.Builder
		switch b.kind {
		case bPara:
			for i, l := range b.lines {
				if i > 0 {
					s.WriteByte('\n')
				}
				s.WriteString(lineStyled(l, wa))
			}
		case bHeading:
			h := lineStyled(b.lines[0], wa)
			if wa && !strings.ContainsAny(h, "*_") {
				h = "*" + h + "*"
			}
			s.WriteString(h)
		case bBullets:
			for i, l := range b.lines {
				if i > 0 {
					s.WriteByte('\n')
				}
				s.WriteString("- " + lineStyled(l, wa))
			}
		case bNumbers:
			n := atoiDefault(b.start, 1)
			for i, l := range b.lines {
				if i > 0 {
					s.WriteByte('\n')
				}
				s.WriteString(itoa(n+i) + ". " + lineStyled(l, wa))
			}
		case bQuote:
			for i, l := range b.lines {
				if i > 0 {
					s.WriteByte('\n')
				}
				s.WriteString("> " + lineStyled(l, wa))
			}
		case bCode:
			s.WriteString(strings.Join(b.lines, "\n"))
		case bRule:
			s.WriteString("----")
		}
		parts = append(parts, s.String())
	}
	return strings.Join(parts, "\n\n")
}

const (
	pStyle    = `margin:0 0 14px 0;`
	listStyle = `margin:0 0 14px 0;padding:0 0 0 24px;`
)

// markdownHTML renders Markdown-ish src as email-safe HTML.
func markdownHTML(src string) string { return markdownHTMLWithin(src, -1) }

// markdownHTMLWithin is markdownHTML that stops, between blocks or lines,
// once it has written more than limit bytes (limit < 0: no bound). Markup
// can be many times its source (a one-character code span is some 140
// bytes), so a caller that can use only so much says so.
func markdownHTMLWithin(src string, limit int) string {
	var b strings.Builder
	over := func() bool { return limit >= 0 && b.Len() > limit }
	left := func() int {
		if limit < 0 {
			return -1
		}
		return max(limit-b.Len(), 0)
	}
	for _, blk := range parseBlocks(src) {
		if over() {
			break
		}
		switch blk.kind {
		case bPara:
			b.WriteString(`<p style="` + pStyle + `">`)
			for i, l := range blk.lines {
				if over() {
					break
				}
				if i > 0 {
					b.WriteString("<br>\n")
				}
				b.WriteString(lineHTML(l, left()))
			}
			b.WriteString("</p>\n")
		case bHeading:
			size := []string{"22px", "20px", "18px", "16px", "15px", "15px"}[blk.level-1]
			lvl := itoa(min(blk.level+1, 6))
			b.WriteString(`<h` + lvl + ` style="margin:18px 0 10px 0;font-size:` + size + `;line-height:1.3;font-weight:bold;">` +
				lineHTML(blk.lines[0], left()) + `</h` + lvl + ">\n")
		case bBullets, bNumbers:
			tag := "ul"
			attr := ""
			if blk.kind == bNumbers {
				tag = "ol"
				if n := atoiDefault(blk.start, 1); n != 1 {
					attr = ` start="` + itoa(n) + `"`
				}
			}
			b.WriteString("<" + tag + attr + ` style="` + listStyle + `">` + "\n")
			for _, l := range blk.lines {
				if over() {
					break
				}
				b.WriteString(`<li style="margin:0 0 6px 0;">` + lineHTML(l, left()) + "</li>\n")
			}
			b.WriteString("</" + tag + ">\n")
		case bQuote:
			b.WriteString(`<blockquote style="margin:0 0 14px 0;padding:0 0 0 12px;border-left:3px solid #d4d4d8;color:#52525b;">`)
			for i, l := range blk.lines {
				if over() {
					break
				}
				if i > 0 {
					b.WriteString("<br>\n")
				}
				b.WriteString(lineHTML(l, left()))
			}
			b.WriteString("</blockquote>\n")
		case bCode:
			b.WriteString(`<pre style="margin:0 0 14px 0;padding:10px;background:#f4f4f5;border-radius:4px;font-family:Menlo,Consolas,monospace;font-size:13px;white-space:pre-wrap;">` +
				html.EscapeString(strings.Join(blk.lines, "\n")) + "</pre>\n")
		case bRule:
			b.WriteString(`<hr style="border:0;border-top:1px solid #e4e4e7;margin:18px 0;">` + "\n")
		}
	}
	return b.String()
}

func atoiDefault(s string, d int) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' || n > 1e8 {
			return d
		}
		n = n*10 + int(c-'0')
	}
	if s == "" {
		return d
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }
