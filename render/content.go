package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"path"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
)

// content is what one channel makes of an envelope before templates run.
type content struct {
	view        View
	attachments []Attachment
	mediaURLs   []string
	warnings    []string
	textSrc     string // the Markdown-ish source of view.Text
	// texts lists every surface text (a2ui Result.Texts), for tests.
	surfaceTexts []string
	// domainData are the envelope's domain-data parts kept on the channel
	// (a chat channel shows them as fields when no surface does).
	domainData []envelope.Part
}

func (c *content) warnf(format string, args ...any) {
	c.warnings = append(c.warnings, fmt.Sprintf(format, args...))
}

// build filters the envelope for channel and turns each part into view
// material, following the part-type table of docs/envelope.md.
func (r *Renderer) build(in *Input, channel string) (*content, error) {
	if in.Envelope == nil {
		return nil, ErrNoEnvelope
	}
	reg := in.Registry
	if reg == nil {
		reg = r.reg
	}
	if in.Now.IsZero() {
		in.Now = in.Envelope.Meta.ProducedAt
	}
	spec, err := envelope.LookupChannel(channel)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	email := spec.Class == envelope.ClassEmail
	var consumes []string
	if spec.Class == envelope.ClassWebhook {
		consumes = in.Consumes
	}
	env := reg.Filter(in.Envelope, channel, consumes)
	c := &content{view: View{Channel: channel, Recipient: in.Recipient, Now: in.Now, Page: in.Page && email}}
	noReplies := email && r.cfg.NoEmailReplies
	c.view.NoReplies = noReplies
	c.view.Conversation = email && in.Conversation

	fetched := map[string]FetchedArtifact{}
	for _, f := range in.Artifacts {
		fetched[f.ArtifactID] = f
	}
	handles := map[string]ApprovalHandle{}
	for _, h := range in.Approvals {
		handles[h.ApprovalID] = h
	}

	var texts []string
	var sawResponse, sawClarify, sawError bool
	sb := r.newSurfaceBudget(in.Page && email)
	var domainData []envelope.Part
	for i, p := range env.Parts {
		switch pt := p.PartType(); pt {
		case envelope.PartResponse, envelope.PartClarify, envelope.PartError:
			if t := strings.TrimSpace(p.TextValue()); t != "" {
				texts = append(texts, t)
			}
			sawResponse = sawResponse || pt == envelope.PartResponse
			sawClarify = sawClarify || pt == envelope.PartClarify
			sawError = sawError || pt == envelope.PartError
		case envelope.PartA2UISurface:
			if sb.room < minSurfaceRoom {
				c.warnf("surface %d: not shown: the surfaces before it fill the %d bytes surfaces may take in one message", i, sb.roomAtStart)
				continue
			}
			res, err := r.renderSurface(p.Data, in, &sb)
			if err != nil {
				return nil, fmt.Errorf("render: parts[%d] (a2ui-surface): %w", i, err)
			}
			for _, w := range res.Warnings {
				c.warnf("surface %d: %s", i, w)
			}
			if strings.TrimSpace(res.Text) == "" && strings.TrimSpace(res.HTML) == "" {
				c.warnf("surface %d: rendered nothing", i)
				continue
			}
			var first string
			for _, t := range res.Texts {
				if t = oneLine(t); utf8.RuneCountInString(t) >= 3 {
					first = t
					break
				}
			}
			c.view.Surfaces = append(c.view.Surfaces, SurfaceView{
				firstText: first,
				Title:     oneLine(res.Title),
				Text:      strings.TrimRight(res.Text, "\n "),
				HTML:      template.HTML(res.HTML), // a2ui guarantees escaped, email-safe HTML
			})
			c.surfaceTexts = append(c.surfaceTexts, res.Texts...)
		case envelope.PartDomainData:
			domainData = append(domainData, p)
		case envelope.PartArtifact:
			var a envelope.Artifact
			if err := p.DecodeData(&a); err != nil {
				c.warnf("artifact part %d: %v", i, err)
				continue
			}
			r.addArtifact(c, channel, a, fetched[a.ArtifactID])
		case envelope.PartCitation:
			c.view.Citations = append(c.view.Citations, citationOf(p, len(c.view.Citations)+1))
		case envelope.PartApprovalRequest:
			var ar envelope.ApprovalRequest
			if err := p.DecodeData(&ar); err != nil {
				c.warnf("approval-request part %d: %v", i, err)
				continue
			}
			h, ok := handles[ar.ApprovalID]
			if !ok {
				c.warnf("approval %s: no handle for this recipient; shown without a way to answer", ar.ApprovalID)
			}
			c.view.Approvals = append(c.view.Approvals, r.approvalView(ar, p, h, ok, channel, in.Now))
		default:
			// Consumer types kept on this channel: text is body text, data an
			// email attachment.
			if p.Text != nil {
				if t := strings.TrimSpace(*p.Text); t != "" {
					texts = append(texts, t)
				}
			} else if email {
				c.attachJSON(sanitizeFilename(pt)+".json", p.Data)
			} else {
				c.warnf("part %d (%s): data dropped on %s", i, pt, channel)
			}
		}
	}
	c.domainData = domainData
	if len(domainData) > 0 {
		switch {
		case len(c.view.Surfaces) > 0:
			// shown through the surface
		case spec.Class == envelope.ClassChat:
			// shown as fields by the chat renderer
		case r.cfg.AttachDomainData && !in.Page:
			for i, p := range domainData {
				name := "domain-data"
				if s, _ := p.Metadata["slotKey"].(string); s != "" {
					name = sanitizeFilename(s)
				}
				if len(domainData) > 1 {
					name += fmt.Sprintf("-%d", i+1)
				}
				c.attachJSON(name+".json", p.Data)
			}
		default:
			c.warnf("domain-data not shown: no surface, and attaching domain data is off")
		}
	}
	// Email carries one token per message: the first answerable approval.
	// Where no intake reads replies, none is answered by reply.
	for i := range c.view.Approvals {
		a := &c.view.Approvals[i]
		if a.Token != "" && !noReplies {
			a.ByReply = true
			break
		}
	}

	switch {
	case len(c.view.Approvals) > 0:
		c.view.Kind = KindApprovalRequest
	case env.Meta.FinalizedBy == "error" || (sawError && !sawResponse):
		c.view.Kind = KindError
	case env.Meta.FinalizedBy == "clarifying" || (sawClarify && !sawResponse):
		c.view.Kind = KindClarification
	default:
		c.view.Kind = KindResult
	}
	if in.Reminder && len(c.view.Approvals) > 0 {
		texts = append([]string{ReminderLine}, texts...)
		c.view.Reminder = true
	}
	c.textSrc = strings.Join(texts, "\n\n")
	switch {
	case channel == envelope.ChannelWhatsApp, spec.Class == envelope.ClassChat:
		// WhatsApp's *bold* and _italic_ are Slack's mrkdwn too.
		c.view.Text = markdownWhatsApp(c.textSrc)
	case email:
		// The text takes what the surfaces left of the message's bound.
		bound := r.contentBound(in.Page) - (sb.roomAtStart - sb.room)
		text, html, shown := fitText(c.textSrc, bound)
		if shown < len(c.textSrc) {
			note := cutNote(in.FullMessageURL, utf8.RuneCountInString(c.textSrc[shown:]))
			c.warnf("text cut at %d bytes of %d: an email shows at most %d bytes of text", shown, len(c.textSrc), bound)
			text = strings.TrimRight(text, "\n") + "\n\n" + note
			html += markdownHTML(note)
			c.view.Cut = true
		}
		c.view.Text, c.view.HTML = text, template.HTML(html)
	default:
		c.view.Text = markdownText(c.textSrc)
	}
	if c.textSrc == "" && len(c.view.Surfaces) == 0 && len(c.view.Approvals) == 0 &&
		len(c.view.Artifacts) == 0 && len(c.attachments) == 0 {
		return nil, ErrEmpty
	}
	c.view.DefaultSubject = defaultSubject(c)
	return c, nil
}

// Message kinds (template names).
const (
	KindResult               = "result"
	KindClarification        = "clarification"
	KindError                = "error"
	KindApprovalRequest      = "approval-request"
	KindApprovalConfirmation = "approval-confirmation"
	KindAlreadyDecided       = "already-decided"
	KindNotUnderstood        = "not-understood"
)

func (c *content) attachJSON(name string, data json.RawMessage) {
	var buf bytes.Buffer
	if json.Indent(&buf, data, "", "  ") != nil {
		buf.Reset()
		buf.Write(data)
	}
	buf.WriteByte('\n')
	c.attachments = append(c.attachments, Attachment{Filename: uniqueName(c.attachments, name), MimeType: "application/json", Bytes: buf.Bytes()})
	c.view.Attached = append(c.view.Attached, c.attachments[len(c.attachments)-1].Filename)
}

func (r *Renderer) addArtifact(c *content, channel string, a envelope.Artifact, f FetchedArtifact) {
	name := a.Name
	if name == "" {
		name = f.Name
	}
	mimeType := a.MimeType
	if mimeType == "" {
		mimeType = f.MimeType
	}
	if name == "" {
		name = a.ArtifactID + extensionFor(mimeType)
	}
	name = sanitizeFilename(name)
	size := a.SizeBytes
	link := ""
	if safeURL(f.URL) {
		link = f.URL
	}
	if link == "" && safeURL(a.URI) {
		link = a.URI
	}
	v := ArtifactView{ID: a.ArtifactID, Name: name, MimeType: mimeType, URL: link, Note: f.Note}
	if spec, _ := envelope.Channel(channel); spec.Class == envelope.ClassEmail && !c.view.Page {
		b := f.Bytes
		if b == nil {
			b = a.Bytes
		}
		switch {
		case b != nil && int64(len(b)) <= r.cfg.MaxAttachmentBytes:
			name = uniqueName(c.attachments, name)
			v.Name, v.Attached, v.Note = name, true, ""
			size = int64(len(b))
			c.attachments = append(c.attachments, Attachment{Filename: name, MimeType: mimeType, Bytes: b})
		case b != nil:
			v.Note = fmt.Sprintf("too large to attach (%s; the limit is %s)", humanSize(int64(len(b))), humanSize(r.cfg.MaxAttachmentBytes))
			size = int64(len(b))
		}
	}
	if size > 0 {
		v.Size = humanSize(size)
	}
	if !v.Attached && v.URL == "" {
		if v.Note == "" {
			v.Note = "not available by link"
			if c.view.Page {
				v.Note = "sent with the original message"
			}
		}
		c.warnf("artifact %s: neither attached nor linked", a.ArtifactID)
	}
	if channel == envelope.ChannelWhatsApp && v.URL != "" && whatsAppMedia(mimeType) {
		c.mediaURLs = append(c.mediaURLs, v.URL)
	}
	c.view.Artifacts = append(c.view.Artifacts, v)
}

// whatsAppMedia: types WhatsApp shows as media rather than as a link.
func whatsAppMedia(mimeType string) bool {
	mt := strings.ToLower(strings.TrimSpace(strings.SplitN(mimeType, ";", 2)[0]))
	switch {
	case mt == "image/jpeg", mt == "image/png", mt == "application/pdf",
		strings.HasPrefix(mt, "audio/"), mt == "video/mp4":
		return true
	}
	return false
}

func (r *Renderer) approvalView(ar envelope.ApprovalRequest, p envelope.Part, h ApprovalHandle, ok bool, channel string, now time.Time) ApprovalView {
	if ok && h.Request.ApprovalID != "" {
		// The approvals package's copy wins: it is what was stored.
		ar = h.Request
	}
	v := ApprovalView{
		ApprovalID: ar.ApprovalID,
		Summary:    oneLine(ar.Summary),
		Tool:       oneLine(ar.ToolName),
		Handler:    oneLine(ar.Handler),
		Why:        reasonOf(p),
	}
	if v.Summary == "" {
		v.Summary = "Run " + v.Tool
	}
	keys := make([]string, 0, len(ar.Args))
	for k := range ar.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 12 {
			v.Args = append(v.Args, Arg{Name: "…", Value: fmt.Sprintf("%d more", len(keys)-12)})
			break
		}
		v.Args = append(v.Args, Arg{Name: truncRunes(oneLine(k), 40), Value: truncRunes(argValue(ar.Args[k]), 160)})
	}
	exp := h.ExpiresAt
	if exp.IsZero() && ar.ExpiresAt != nil {
		exp = *ar.ExpiresAt
	}
	if !exp.IsZero() {
		v.Expires = exp.In(r.cfg.TimeZone).Format("Mon 2 Jan 2006, 15:04 MST")
		if d := exp.Sub(now); d > 0 {
			v.ExpiresIn = relative(d)
		} else {
			v.Expired = true
		}
	}
	if ok && (h.Decided || h.Note != "") {
		v.Decided, v.Note = h.Decided, oneLine(h.Note)
		if v.Decided {
			v.Expires, v.ExpiresIn, v.Expired = "", "", false
		}
		return v
	}
	// An expired approval can no longer be answered: its rendition shows
	// no code, link, token or button that would invite an answer.
	if ok && !v.Expired {
		v.Token, v.Code = h.Token, h.Code
		if safeURL(h.LinkURL) {
			v.LinkURL = h.LinkURL
		}
		if h.Token != "" {
			v.SubjectTag = "[approval:" + h.Token + "]"
		}
		for i, b := range h.Buttons {
			if i == 3 {
				break
			}
			v.Buttons = append(v.Buttons, Button{Title: truncRunes(oneLine(b.Title), 20), Payload: b.Payload})
		}
		// Answerable by the link, or by a handle the channel carries: a
		// token in a reply (where replies are read), a code, a button.
		spec, _ := envelope.Channel(channel)
		byReply := spec.Inbound.Accepts && spec.Supports(envelope.HandleToken) && h.Token != "" &&
			!(spec.Class == envelope.ClassEmail && r.cfg.NoEmailReplies)
		v.Answerable = h.LinkURL != "" || byReply ||
			(spec.Supports(envelope.HandleCode) && h.Code != "") ||
			(spec.Supports(envelope.HandleButton) && len(h.Buttons) > 0)
	}
	return v
}

func reasonOf(p envelope.Part) string {
	m, err := p.DataObject()
	if err != nil {
		return ""
	}
	for _, k := range []string{"reason", "why", "justification", "rationale"} {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return truncRunes(strings.TrimSpace(s), 500)
		}
	}
	return ""
}

// argValue shows a tool argument compactly: strings as they are, flat
// objects as "k: v, k: v", lists of scalars comma-separated, the rest JSON.
func argValue(v any) string {
	switch x := v.(type) {
	case string:
		return oneLine(x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		flat := true
		for k, e := range x {
			keys = append(keys, k)
			switch e.(type) {
			case map[string]any, []any:
				flat = false
			}
		}
		if flat && len(x) > 0 {
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = oneLine(k) + ": " + argValue(x[k])
			}
			return strings.Join(parts, ", ")
		}
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				parts = nil
			}
			if parts == nil {
				break
			}
			parts = append(parts, argValue(e))
		}
		if parts != nil && len(x) > 0 {
			return strings.Join(parts, ", ")
		}
	case nil:
		return "(none)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return oneLine(string(b))
}

func relative(d time.Duration) string {
	switch {
	case d < 90*time.Second:
		return "in about a minute"
	case d < 90*time.Minute:
		return fmt.Sprintf("in %d minutes", int((d+30*time.Second)/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("in %d hours", int((d+30*time.Minute)/time.Hour))
	}
	return fmt.Sprintf("in %d days", int((d+12*time.Hour)/(24*time.Hour)))
}

func citationOf(p envelope.Part, n int) CitationView {
	cv := CitationView{N: n}
	if p.Text != nil {
		cv.Text = truncRunes(oneLine(markdownText(*p.Text)), 300)
		return cv
	}
	m, err := p.DataObject()
	if err != nil {
		return cv
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
				return strings.TrimSpace(s)
			}
		}
		return ""
	}
	cv.Title = truncRunes(oneLine(str("title", "name", "source", "label")), 200)
	if u := str("url", "uri", "href", "link"); safeURL(u) {
		cv.URL = u
	}
	cv.Text = truncRunes(oneLine(str("text", "snippet", "quote", "excerpt", "description")), 300)
	if cv.Title == "" && cv.URL == "" && cv.Text == "" {
		cv.Text = truncRunes(oneLine(str("path")), 200)
	}
	return cv
}

// oneLine folds every run of whitespace and control characters into one
// space and trims.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// truncRunes cuts s to at most n runes, ending in "…" when cut.
func truncRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}

func humanSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.0f kB", float64(n)/1000)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

var extensions = map[string]string{
	"application/pdf": ".pdf", "application/json": ".json", "text/plain": ".txt", "text/csv": ".csv",
	"text/html": ".html", "text/calendar": ".ics", "image/png": ".png", "image/jpeg": ".jpg",
	"image/gif": ".gif", "image/webp": ".webp", "image/svg+xml": ".svg", "audio/mpeg": ".mp3",
	"audio/ogg": ".ogg", "video/mp4": ".mp4", "application/zip": ".zip",
}

func extensionFor(mimeType string) string {
	mt := strings.ToLower(strings.TrimSpace(strings.SplitN(mimeType, ";", 2)[0]))
	if e, ok := extensions[mt]; ok {
		return e
	}
	return ".bin"
}

// sanitizeFilename keeps a file name safe for a Content-Disposition and any
// file system: no paths, no control characters, at most 100 characters.
func sanitizeFilename(s string) string {
	s = path.Base(strings.ReplaceAll(s, "\\", "/"))
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsControl(r), strings.ContainsRune(`/\:*?"<>|`, r):
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	out := strings.Trim(oneLine(b.String()), ". ")
	if out == "" {
		out = "file"
	}
	return truncRunes(out, 100)
}

func uniqueName(have []Attachment, name string) string {
	taken := func(n string) bool {
		for _, a := range have {
			if a.Filename == n {
				return true
			}
		}
		return false
	}
	if !taken(name) {
		return name
	}
	ext := path.Ext(name)
	base := strings.TrimSuffix(name, ext)
	for i := 2; ; i++ {
		if n := fmt.Sprintf("%s-%d%s", base, i, ext); !taken(n) {
			return n
		}
	}
}
