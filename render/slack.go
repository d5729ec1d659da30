package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
)

// Slack's Block Kit limits (characters, counts), from its reference.
const (
	SlackMaxBlocks      = 50   // blocks in one message
	SlackMaxSectionText = 3000 // a section's text
	SlackMaxFieldText   = 2000 // one field of a section
	SlackMaxFields      = 10   // fields of one section
	SlackMaxHeaderText  = 150  // a header's plain text
	SlackMaxButtonText  = 75   // a button's plain text
	SlackMaxButtonValue = 2000 // a button's value
	SlackMaxContext     = 10   // elements of a context block
	slackMaxTextField   = 3000 // the message's notification text, as beachd keeps it
)

// Action ids of the approval buttons; the interaction endpoint reads them
// back.
const (
	SlackActionApprove = "beachd_approve"
	SlackActionDeny    = "beachd_deny"
)

// Slack is a message in Slack's Block Kit: Text is the notification and
// fallback text, Blocks what Slack shows. Every string of mrkdwn is escaped
// (&, <, >), so nothing in the content becomes a link, a mention (<!channel>,
// <@U…>) or a date; plain_text is shown as is by Slack.
type Slack struct {
	Text      string       `json:"text"`
	Blocks    []SlackBlock `json:"blocks"`
	Truncated bool         `json:"truncated"`
	Warnings  []string     `json:"warnings,omitempty"`
}

// SlackText is a Block Kit text object ("mrkdwn" or "plain_text").
type SlackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// SlackButton is a Block Kit button element.
type SlackButton struct {
	Type     string    `json:"type"` // "button"
	Text     SlackText `json:"text"` // plain_text
	ActionID string    `json:"action_id,omitempty"`
	Value    string    `json:"value,omitempty"`
	URL      string    `json:"url,omitempty"`
	Style    string    `json:"style,omitempty"` // primary, danger
}

// SlackBlock is one Block Kit layout block: section, header, context,
// actions, divider or image. Elements holds SlackText (context) or
// SlackButton (actions) values.
type SlackBlock struct {
	Type     string      `json:"type"`
	BlockID  string      `json:"block_id,omitempty"`
	Text     *SlackText  `json:"text,omitempty"`
	Fields   []SlackText `json:"fields,omitempty"`
	Elements []any       `json:"elements,omitempty"`
	ImageURL string      `json:"image_url,omitempty"`
	AltText  string      `json:"alt_text,omitempty"`
}

// SlackEscape escapes text for mrkdwn: &, < and > become entities, which is
// all Slack asks, and all it takes to keep <!channel>, <@U…> and <url|x>
// out of content.
func SlackEscape(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackLink is a mrkdwn link to a safe URL; a URL that would break out of
// the link's angle brackets is shown as escaped text instead.
func slackLink(url, label string) string {
	if !safeURL(url) || strings.ContainsAny(url, "<>| \n") {
		return SlackEscape(label)
	}
	if label == "" {
		return "<" + url + ">"
	}
	return "<" + url + "|" + SlackEscape(strings.ReplaceAll(label, "|", "¦")) + ">"
}

// slackText escapes a rendered text for mrkdwn, keeping its quotes ("> "
// at a line's start) as Slack's block quotes.
func slackText(s string) string {
	lines := strings.Split(SlackEscape(s), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "&gt; ") {
			lines[i] = "> " + l[len("&gt; "):]
		}
	}
	return strings.Join(lines, "\n")
}

func mrkdwn(s string) *SlackText { return &SlackText{Type: "mrkdwn", Text: s} }
func plain(s string) SlackText   { return SlackText{Type: "plain_text", Text: s} }

// Slack renders the envelope as one Slack message: the response text as
// mrkdwn sections (each within 3,000 characters), each A2UI surface as a
// header and sections of its text rendition, domain data (when no surface
// shows it) as fields, artifacts as links, citations as a context line, and
// each approval as its summary, arguments as fields, and Approve and Deny
// buttons carrying its handle's payloads. A message is at most 50 blocks:
// the approvals are always kept; the text is cut (with in.FullMessageURL
// when given) and surfaces, data and links dropped, with a warning, when
// they do not fit.
func (r *Renderer) Slack(in Input) (*Slack, error) {
	c, err := r.build(&in, envelope.ChannelSlack)
	if err != nil {
		return nil, err
	}
	out := &Slack{}
	// Only the head of a long text can be shown.
	maxText := (SlackMaxBlocks / 2) * SlackMaxSectionText
	if head, cut := precut(c.view.Text, maxText); cut {
		c.view.Text, c.view.Cut, out.Truncated = head, true, true
		c.warnf("text cut to %d characters: a Slack message shows at most %d blocks", maxText, SlackMaxBlocks)
	}

	approvals := slackApprovals(c.view.Approvals)
	var surfaces, data, links []SlackBlock
	for i, s := range c.view.Surfaces {
		if i > 0 || c.view.Text != "" {
			surfaces = append(surfaces, SlackBlock{Type: "divider"})
		}
		if s.Title != "" {
			surfaces = append(surfaces, SlackBlock{Type: "header", Text: &SlackText{Type: "plain_text", Text: truncRunes(s.Title, SlackMaxHeaderText)}})
		}
		surfaces = append(surfaces, slackSections(SlackEscape(withoutTitle(s.Text, s.Title)))...)
	}
	if len(c.view.Surfaces) == 0 {
		data = slackFields(c.domainData, c)
	}
	if a := slackArtifacts(c.view.Artifacts); a != nil {
		links = append(links, *a)
	}
	if cit := slackCitations(c.view.Citations); cit != nil {
		links = append(links, *cit)
	}

	// What is left for the text after everything else, then what is left
	// for the rest after the text, in that order of importance.
	room := SlackMaxBlocks - len(approvals)
	if room < 0 {
		c.warnf("%d approvals take more than the %d blocks of a message: the last ones are not shown", len(c.view.Approvals), SlackMaxBlocks)
		approvals, room = approvals[:SlackMaxBlocks], 0
	}
	text := slackSections(slackText(c.view.Text))
	restWanted := len(surfaces) + len(data) + len(links)
	if textRoom := room - min(restWanted, room/2); len(text) > textRoom || (out.Truncated && len(text) >= textRoom) {
		keep := max(textRoom-1, 0)
		c.warnf("text cut: %d sections of %d fit in the %d blocks left beside the rest", keep, len(text), room)
		text, out.Truncated = text[:keep], true
	}
	if out.Truncated && room > len(text) {
		more := "_The message was cut here._"
		if in.FullMessageURL != "" {
			more = "_The message was cut here:_ " + slackLink(in.FullMessageURL, "read it whole")
		}
		text = append(text, SlackBlock{Type: "section", Text: mrkdwn(more)})
	}
	room -= len(text)
	for _, g := range []struct {
		name   string
		blocks []SlackBlock
	}{{"A2UI surfaces", surfaces}, {"domain data", data}, {"links", links}} {
		if len(g.blocks) <= room {
			out.Blocks = append(out.Blocks, g.blocks...)
			room -= len(g.blocks)
			continue
		}
		c.warnf("%s not shown whole: %d blocks, %d left of the %d a message may hold", g.name, len(g.blocks), room, SlackMaxBlocks)
		out.Blocks = append(out.Blocks, g.blocks[:room]...)
		room = 0
	}
	out.Blocks = append(append(text, out.Blocks...), approvals...)
	if len(out.Blocks) == 0 {
		return nil, ErrEmpty
	}

	s, err := r.tpl.Execute("slack/"+c.view.Kind+".txt", &c.view, r.cfg.TemplateLimits)
	if err != nil {
		return nil, fmt.Errorf("render slack: %w", err)
	}
	out.Text = truncRunes(SlackEscape(strings.TrimSpace(cleanText(s))), slackMaxTextField)
	if out.Text == "" {
		out.Text = kindPhrase(c.view.Kind)
	}
	out.Warnings = c.warnings
	return out, nil
}

// withoutTitle drops a surface text's first line when it is the title
// (shown as the header), with the underline under it.
func withoutTitle(text, title string) string {
	if title == "" {
		return text
	}
	first, rest, _ := strings.Cut(text, "\n")
	if strings.TrimSpace(first) != title {
		return text
	}
	if under, after, _ := strings.Cut(rest, "\n"); strings.Trim(under, "-=") == "" && under != "" {
		rest = after
	}
	return rest
}

// slackSections splits escaped mrkdwn into sections of at most 3,000
// characters, at paragraph, line or word boundaries, never inside an
// entity.
func slackSections(s string) []SlackBlock {
	s = strings.TrimSpace(s)
	var out []SlackBlock
	for s != "" {
		chunk := s
		if utf8.RuneCountInString(s) > SlackMaxSectionText {
			chunk = string([]rune(s)[:SlackMaxSectionText])
			cut := strings.LastIndex(chunk, "\n\n")
			if cut < SlackMaxSectionText/2 {
				cut = strings.LastIndexByte(chunk, '\n')
			}
			if cut < SlackMaxSectionText/2 {
				cut = strings.LastIndexByte(chunk, ' ')
			}
			if cut < SlackMaxSectionText/2 {
				cut = len(chunk)
				// Never split an entity (&amp; &lt; &gt;).
				if amp := strings.LastIndexByte(chunk, '&'); amp > len(chunk)-5 && !strings.Contains(chunk[amp:], ";") {
					cut = amp
				}
			}
			chunk = chunk[:cut]
		}
		if t := strings.TrimSpace(chunk); t != "" {
			out = append(out, SlackBlock{Type: "section", Text: mrkdwn(t)})
		}
		s = strings.TrimSpace(s[len(chunk):])
	}
	return out
}

// slackApprovals renders each approval: what is asked (summary, the
// arguments as fields), why, the time left, and the Approve and Deny
// buttons, or a line saying it can no longer be answered.
func slackApprovals(as []ApprovalView) []SlackBlock {
	var out []SlackBlock
	for _, a := range as {
		head := "*Approval needed:* " + SlackEscape(a.Summary)
		if a.Why != "" {
			head += "\n*Why:* " + SlackEscape(truncRunes(a.Why, 500))
		}
		sec := SlackBlock{Type: "section", Text: mrkdwn(head)}
		for i, arg := range a.Args {
			if i == SlackMaxFields {
				break
			}
			sec.Fields = append(sec.Fields, SlackText{Type: "mrkdwn",
				Text: "*" + SlackEscape(arg.Name) + "*\n" + SlackEscape(truncRunes(arg.Value, SlackMaxFieldText-100))})
		}
		out = append(out, sec)
		var ctx []string
		if a.Handler != "" {
			ctx = append(ctx, "Requested by "+SlackEscape(a.Handler))
		}
		switch {
		case a.Expired:
			ctx = append(ctx, "This request has expired and can no longer be answered.")
		case a.ExpiresIn != "":
			ctx = append(ctx, "Expires "+SlackEscape(a.ExpiresIn)+" ("+SlackEscape(a.Expires)+")")
		}
		if len(ctx) > 0 {
			out = append(out, SlackBlock{Type: "context", Elements: []any{SlackText{Type: "mrkdwn", Text: strings.Join(ctx, " · ")}}})
		}
		if btn := slackButtons(a); btn != nil {
			out = append(out, *btn)
		} else if !a.Expired && a.LinkURL != "" {
			out = append(out, SlackBlock{Type: "section", Text: mrkdwn(slackLink(a.LinkURL, "Decide on the approval page"))})
		}
	}
	return out
}

// slackButtons is the actions block of an approval: Approve (primary) and
// Deny (danger), each carrying its payload as its value. block_id names
// the approval, so that the update after a decision finds it.
func slackButtons(a ApprovalView) *SlackBlock {
	if a.Expired || len(a.Buttons) < 2 {
		return nil
	}
	var els []any
	for i, b := range a.Buttons[:2] {
		if len(b.Payload) > SlackMaxButtonValue {
			return nil
		}
		action, style := SlackActionApprove, "primary"
		if i == 1 {
			action, style = SlackActionDeny, "danger"
		}
		els = append(els, SlackButton{Type: "button", Text: plain(truncRunes(b.Title, SlackMaxButtonText)),
			ActionID: action, Value: b.Payload, Style: style})
	}
	return &SlackBlock{Type: "actions", BlockID: SlackApprovalBlockID(a.ApprovalID), Elements: els}
}

// SlackApprovalBlockID is the block_id of an approval's buttons.
func SlackApprovalBlockID(approvalID string) string {
	return truncRunes("approval:"+approvalID, 255)
}

// slackFields shows each domain-data part's top-level values as fields
// (at most ten a section, three sections a part), its slotKey as a title.
func slackFields(parts []envelope.Part, c *content) []SlackBlock {
	var out []SlackBlock
	for i, p := range parts {
		m, err := p.DataObject()
		if err != nil || len(m) == 0 {
			c.warnf("domain-data part %d: not an object, not shown", i)
			continue
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if slot, _ := p.Metadata["slotKey"].(string); strings.TrimSpace(slot) != "" {
			out = append(out, SlackBlock{Type: "context", Elements: []any{SlackText{Type: "mrkdwn", Text: "*" + SlackEscape(truncRunes(oneLine(slot), 200)) + "*"}}})
		}
		const maxSections = 3
		for s := 0; s < maxSections && s*SlackMaxFields < len(keys); s++ {
			sec := SlackBlock{Type: "section"}
			for _, k := range keys[s*SlackMaxFields : min(len(keys), (s+1)*SlackMaxFields)] {
				sec.Fields = append(sec.Fields, SlackText{Type: "mrkdwn",
					Text: "*" + SlackEscape(truncRunes(oneLine(k), 100)) + "*\n" + SlackEscape(truncRunes(argValue(m[k]), SlackMaxFieldText-200))})
			}
			out = append(out, sec)
		}
		if len(keys) > maxSections*SlackMaxFields {
			c.warnf("domain-data part %d: %d values, the first %d shown", i, len(keys), maxSections*SlackMaxFields)
		}
	}
	return out
}

// slackArtifacts lists the artifacts as links (name, size), one section.
func slackArtifacts(as []ArtifactView) *SlackBlock {
	var lines []string
	for _, a := range as {
		l := slackLink(a.URL, a.Name)
		if a.URL == "" {
			l = SlackEscape(a.Name)
		}
		if a.Size != "" {
			l += " (" + SlackEscape(a.Size) + ")"
		}
		if a.URL == "" && a.Note != "" {
			l += ": " + SlackEscape(a.Note)
		}
		lines = append(lines, "📎 "+l)
	}
	if len(lines) == 0 {
		return nil
	}
	return &SlackBlock{Type: "section", Text: mrkdwn(truncRunes(strings.Join(lines, "\n"), SlackMaxSectionText))}
}

// slackCitations is one context block of numbered sources.
func slackCitations(cs []CitationView) *SlackBlock {
	var els []any
	for _, cv := range cs {
		if len(els) == SlackMaxContext {
			break
		}
		label := cv.Title
		if label == "" {
			label = cv.Text
		}
		t := fmt.Sprintf("[%d] ", cv.N)
		if cv.URL != "" {
			t += slackLink(cv.URL, truncRunes(label, 200))
		} else {
			t += SlackEscape(truncRunes(label, 300))
		}
		els = append(els, SlackText{Type: "mrkdwn", Text: t})
	}
	if els == nil {
		return nil
	}
	return &SlackBlock{Type: "context", Elements: els}
}

// JSON is the message as the chat.postMessage arguments beachd sends
// (text and blocks), for previews and tests.
func (s *Slack) JSON() ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	err := e.Encode(struct {
		Text   string       `json:"text"`
		Blocks []SlackBlock `json:"blocks"`
	}{s.Text, s.Blocks})
	return b.Bytes(), err
}
