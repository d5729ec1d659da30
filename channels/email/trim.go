package email

import (
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Attribution lines that introduce a quoted message, per client and
// language. They are matched against one line, or two or three lines joined
// (clients wrap long attributions).
var quoteHeaderRes = []*regexp.Regexp{
	// Gmail, Apple Mail, Thunderbird, iOS/Android: "On … wrote:".
	regexp.MustCompile(`(?i)^\s*on\b.{0,200}\b(wrote|writes)\s*:\s*$`),
	// Gnus, mutt and others: "Name <a@b> writes:", "a@b wrote:".
	regexp.MustCompile(`(?i)^.{0,200}\S+@\S+.{0,100}\b(wrote|writes)\s*:\s*$`),
	// German "Am … schrieb …:", French "Le … a écrit :", Spanish "El …
	// escribió:", Dutch "Op … schreef …:", Italian "Il … ha scritto:",
	// Portuguese "Em … escreveu:", Swedish "Den … skrev:".
	regexp.MustCompile(`(?i)^\s*am\b.{0,200}\bschrieb\b.{0,200}:\s*$`),
	regexp.MustCompile(`(?i)^\s*le\b.{0,200}\ba\s+écrit\s*:\s*$`),
	regexp.MustCompile(`(?i)^\s*el\b.{0,200}\bescribió\s*:\s*$`),
	regexp.MustCompile(`(?i)^\s*op\b.{0,200}\bschreef\b.{0,200}:\s*$`),
	regexp.MustCompile(`(?i)^\s*op\b.{0,200}\bhet volgende geschreven\s*:\s*$`),
	regexp.MustCompile(`(?i)^\s*il\b.{0,200}\bha\s+scritto\s*:\s*$`),
	regexp.MustCompile(`(?i)^\s*em\b.{0,200}\bescreveu\s*:\s*$`),
	regexp.MustCompile(`(?i)^\s*den\b.{0,200}\bskrev\b.{0,200}:\s*$`),
	// Japanese Gmail "2024年1月15日(月) 10:00 Name <a@b>:" and Apple Mail
	// "2024/01/15 10:00、Name <a@b>のメール:".
	regexp.MustCompile(`^\s*\d{4}年\d{1,2}月\d{1,2}日.{0,200}[:：]\s*$`),
	regexp.MustCompile(`^\s*\d{4}/\d{1,2}/\d{1,2}.{0,200}(のメール|のメッセージ|は書きました)[:：]\s*$`),
	// Chinese "… 写道：".
	regexp.MustCompile(`^.{0,200}写道[:：]\s*$`),
	// Outlook and old clients.
	regexp.MustCompile(`(?i)^\s*-{2,}\s*(original message|ursprüngliche nachricht|message d'origine|mensaje original|oorspronkelijk bericht|messaggio originale|forwarded message|weitergeleitete nachricht)\s*-{2,}\s*$`),
	regexp.MustCompile(`^\s*_{20,}\s*$`),
}

// attributionStartRe: how the first line of a wrapped attribution starts.
var attributionStartRe = regexp.MustCompile(`(?i)^\s*(on|am|le|el|op|il|em|den)\b|^\s*\d{4}\s*[/年.-]|@|<`)

// Outlook's header block: "From:" followed within a few lines by "Sent:" or
// "Date:" (and their translations).
var (
	outlookFromRe = regexp.MustCompile(`(?i)^\s*\*?(from|von|de|van|da|från|差出人|发件人)\s*\*?\s*[:：]`)
	outlookSentRe = regexp.MustCompile(`(?i)^\s*\*?(sent|date|gesendet|datum|envoyé|date|enviado|fecha|verzonden|inviato|data|skickat|送信日時|发送时间)\s*\*?\s*[:：]`)
)

// Lines that start a signature; everything from them on is dropped.
var signatureRes = []*regexp.Regexp{
	regexp.MustCompile(`^--\s?$`),
	regexp.MustCompile(`(?i)^\s*(sent from my|sent from outlook|get outlook for|sent from yahoo mail|sent from mail for windows|sent via|sent with proton mail|von meinem .{1,40} gesendet|gesendet von meinem|envoyé de mon|envoyé depuis mon|enviado desde mi|enviado de mi|verzonden vanaf mijn|verstuurd vanaf mijn|inviato da)\b`),
	regexp.MustCompile(`^\s*(iPhone|iPad|Android)から送信\s*$`),
}

// TrimReply returns the new text of a reply: quoted text (a "> " block, an
// attribution line and what follows it, an Outlook header block and what
// follows it) and signatures removed. For a bottom-posted reply (quote
// first, answer below) it returns the answer below the quote.
func TrimReply(text string) string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	lines := strings.Split(text, "\n")
	for {
		h, n := findQuoteHeader(lines)
		if h < 0 {
			break
		}
		before := unquoted(lines[:h])
		if strings.TrimSpace(strings.Join(before, "\n")) != "" {
			lines = before
			break
		}
		// Bottom-posted: nothing above the attribution; keep looking below.
		lines = lines[h+n:]
	}
	lines = cutSignature(unquoted(lines))
	return tidy(lines)
}

// findQuoteHeader returns the index of the first attribution line and how
// many lines it spans, or -1.
func findQuoteHeader(lines []string) (int, int) {
	for i := range lines {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), ">") {
			continue
		}
		for span := 1; span <= 3 && i+span <= len(lines); span++ {
			// A wrapped attribution has no blank line inside and starts
			// like one; "Approve" above "On … wrote:" is not part of it.
			if span > 1 && (strings.TrimSpace(lines[i+span-1]) == "" || !attributionStartRe.MatchString(lines[i])) {
				break
			}
			joined := strings.Join(trimAll(lines[i:i+span]), " ")
			if joined == "" {
				break
			}
			for _, re := range quoteHeaderRes {
				if re.MatchString(joined) {
					return i, span
				}
			}
		}
		if outlookFromRe.MatchString(lines[i]) {
			for j := i + 1; j < len(lines) && j <= i+4; j++ {
				if outlookSentRe.MatchString(lines[j]) {
					// Everything from here on is the quoted message.
					return i, len(lines) - i
				}
			}
		}
	}
	return -1, 0
}

func trimAll(ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = strings.TrimSpace(l)
	}
	return out
}

// unquoted drops "> " lines.
func unquoted(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), ">") {
			continue
		}
		out = append(out, l)
	}
	return out
}

func cutSignature(lines []string) []string {
	for i, l := range lines {
		for _, re := range signatureRes {
			if re.MatchString(l) {
				return lines[:i]
			}
		}
	}
	return lines
}

// tidy trims trailing space, leading and trailing blank lines, and runs of
// more than one blank line.
func tidy(lines []string) string {
	var out []string
	blank := 0
	for _, l := range lines {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		l = strings.ReplaceAll(l, "\u00a0", " ")
		if strings.TrimSpace(l) == "" {
			blank++
			continue
		}
		if len(out) > 0 && blank > 0 {
			out = append(out, "")
		}
		blank = 0
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// htmlToText renders an HTML reply as plain text with the quoted parts
// removed first: <blockquote>, Gmail's gmail_quote, Thunderbird's
// moz-cite-prefix, Yahoo's yahoo_quoted, Outlook's divRplyFwdMsg and
// everything after appendonsend. Output is capped at max bytes.
func htmlToText(s string, max int) string {
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		return ""
	}
	var b strings.Builder
	r := htmlRenderer{b: &b, max: max}
	r.node(doc, 0)
	return b.String()
}

type htmlRenderer struct {
	b    *strings.Builder
	max  int
	stop bool
}

func isQuoteNode(n *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	if n.DataAtom == atom.Blockquote {
		return true
	}
	for _, a := range n.Attr {
		switch a.Key {
		case "class":
			for _, c := range strings.Fields(a.Val) {
				switch c {
				case "gmail_quote", "gmail_attr", "gmail_quote_container", "moz-cite-prefix", "yahoo_quoted", "OutlookMessageHeader", "protonmail_quote":
					return true
				}
			}
		case "id":
			switch a.Val {
			case "divRplyFwdMsg", "mail-editor-reference-message-container":
				return true
			}
		}
	}
	return false
}

func isCutNode(n *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	for _, a := range n.Attr {
		if a.Key == "id" && (a.Val == "appendonsend" || a.Val == "divRplyFwdMsg") {
			return true
		}
	}
	return false
}

func (r *htmlRenderer) write(s string) {
	if r.b.Len()+len(s) > r.max {
		r.stop = true
		return
	}
	r.b.WriteString(s)
}

func (r *htmlRenderer) node(n *html.Node, depth int) {
	if r.stop || depth > 200 {
		return
	}
	if isCutNode(n) {
		// Outlook: the reply ends here; the rest of the document is the
		// quoted message.
		r.stop = true
		return
	}
	if isQuoteNode(n) {
		return
	}
	switch n.Type {
	case html.TextNode:
		t := strings.Join(strings.Fields(n.Data), " ")
		if t != "" {
			if strings.HasPrefix(n.Data, " ") || unicode.IsSpace(rune(n.Data[0])) {
				t = " " + t
			}
			if strings.HasSuffix(n.Data, " ") || strings.HasSuffix(n.Data, "\n") {
				t += " "
			}
			r.write(t)
		}
		return
	case html.ElementNode:
		switch n.DataAtom {
		case atom.Script, atom.Style, atom.Head, atom.Title:
			return
		case atom.Br:
			r.write("\n")
			return
		case atom.Hr:
			r.write("\n\n")
			return
		}
	}
	block := n.Type == html.ElementNode && isBlock(n.DataAtom)
	if block {
		r.write("\n")
	}
	for c := n.FirstChild; c != nil && !r.stop; c = c.NextSibling {
		r.node(c, depth+1)
	}
	if block {
		r.write("\n")
	}
}

func isBlock(a atom.Atom) bool {
	switch a {
	case atom.P, atom.Div, atom.Tr, atom.Li, atom.Ul, atom.Ol, atom.Table, atom.H1, atom.H2, atom.H3,
		atom.H4, atom.H5, atom.H6, atom.Pre, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Body:
		return true
	}
	return false
}
