package email

import (
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

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
