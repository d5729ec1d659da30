package render

import (
	"fmt"
	"sort"
	"strings"
	texttemplate "text/template"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/templates"
)

// WhatsApp body limits (characters).
const (
	whatsAppMax        = 4096
	whatsAppMaxButtons = 1024
)

// WhatsApp renders the envelope as one WhatsApp message: the text in
// WhatsApp's markup (*bold*, _italic_), artifact links, media URLs for the
// artifacts WhatsApp shows (JPEG, PNG, PDF, audio, MP4), and up to three
// quick-reply buttons from the first approval that has them. The body is at
// most 1,024 characters with buttons, 4,096 without; a longer text is cut
// with "…" and followed by in.FullMessageURL when given, the approval lines
// kept.
//
// When in.WhatsAppWindowOpen is false and in.WhatsAppTemplate is set, the
// rendition also carries ContentSID and ContentVariables (each variable a
// text/template over the View); the sender must use them instead of Body.
func (r *Renderer) WhatsApp(in Input) (*WhatsApp, error) {
	c, err := r.build(&in, envelope.ChannelWhatsApp)
	if err != nil {
		return nil, err
	}
	out := &WhatsApp{Buttons: []Button{}, MediaURLs: c.mediaURLs}
	if out.MediaURLs == nil {
		out.MediaURLs = []string{}
	}
	for _, a := range c.view.Approvals {
		if len(a.Buttons) > 0 {
			out.Buttons = a.Buttons
			break
		}
	}
	limit := whatsAppMax
	if len(out.Buttons) > 0 {
		limit = whatsAppMaxButtons
	}
	// Only the head of a long text can be sent: cut it before the
	// templates run, so that their output stays small whatever the text.
	if head, cut := precut(c.view.Text, 2*whatsAppMax); cut {
		c.view.Text = head
	}
	name := "whatsapp/" + c.view.Kind + ".txt"
	exec := func() (string, error) {
		s, err := r.tpl.Execute(name, &c.view, r.cfg.TemplateLimits)
		if err != nil {
			return "", fmt.Errorf("render whatsapp: %w", err)
		}
		return strings.TrimRight(cleanText(s), "\n"), nil
	}
	body, err := exec()
	if err != nil {
		return nil, err
	}
	full := c.view.Text
	for i := 0; i < 4 && utf8.RuneCountInString(body) > limit; i++ {
		over := utf8.RuneCountInString(body) - limit
		keep := utf8.RuneCountInString(c.view.Text) - over - 2
		if i == 0 && in.FullMessageURL != "" {
			c.view.MoreURL = in.FullMessageURL
			keep -= utf8.RuneCountInString("\nFull message: " + in.FullMessageURL)
		}
		c.view.Cut = true
		if keep <= 0 {
			c.view.Text = ""
		} else {
			c.view.Text = cutWords(full, keep)
		}
		if body, err = exec(); err != nil {
			return nil, err
		}
	}
	if utf8.RuneCountInString(body) > limit {
		body = cutWords(body, limit)
	}
	out.Body = body
	if !in.WhatsAppWindowOpen && in.WhatsAppTemplate != nil && in.WhatsAppTemplate.ContentSID != "" {
		out.ContentSID = in.WhatsAppTemplate.ContentSID
		out.ContentVariables, err = contentVariables(in.WhatsAppTemplate.Variables, &c.view, r.cfg.TemplateLimits)
		if err != nil {
			return nil, err
		}
	} else if !in.WhatsAppWindowOpen {
		c.warnf("whatsapp window closed and no content template configured: a free-form message may be refused")
	}
	out.Warnings = c.warnings
	return out, nil
}

// contentVariables evaluates each variable as a text/template over v. A
// variable is at most 1,024 characters, one line.
func contentVariables(vars map[string]string, v *View, lim templates.Limits) (map[string]string, error) {
	out := make(map[string]string, len(vars))
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t, err := texttemplate.New(k).Funcs(templates.Funcs()).Option("missingkey=zero").Parse(vars[k])
		if err != nil {
			return nil, fmt.Errorf("whatsapp content variable %s: %w", k, err)
		}
		var b strings.Builder
		w := &capWriter{b: &b, max: lim.MaxBytes}
		if w.max <= 0 {
			w.max = 64 << 10
		}
		if err := t.Execute(w, v); err != nil {
			return nil, fmt.Errorf("whatsapp content variable %s: %w", k, err)
		}
		out[k] = truncRunes(oneLine(b.String()), 1024)
	}
	return out, nil
}

type capWriter struct {
	b   *strings.Builder
	max int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		return 0, templates.ErrTooLarge
	}
	return w.b.Write(p)
}
