package twilio

import (
	"fmt"
	"strings"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// RenderInput is what a RenderFunc gets for one delivery.
type RenderInput struct {
	Channel string // sms or whatsapp
	Job     *channels.Job
	Now     time.Time
	// WindowOpen: a WhatsApp free-form message is allowed.
	WindowOpen bool
	// Template is the content template to use when the window is closed
	// (or for approvals, when one is configured); nil when there is none.
	Template *ContentTemplate
}

// Message is a rendition ready to send.
type Message struct {
	Body      string
	Buttons   []render.Button
	MediaURLs []string
	// ContentSID and ContentVariables send a WhatsApp content template
	// instead of Body.
	ContentSID       string
	ContentVariables map[string]string
}

// RenderFunc renders a job for a channel. The daemon wires the render
// package's Renderer in here; FallbackRender is the minimal text used until
// then and in tests.
type RenderFunc func(in RenderInput) (*Message, error)

// maxBody is Twilio's limit for one message body.
const maxBody = 1600

// FallbackRender builds a plain message from the envelope's response,
// clarify and error text, plus one line per approval ("Reply YES 4821 or NO
// 4821", and the link). On WhatsApp it adds the approvals' quick-reply
// buttons, and uses in.Template (variables filled from the same values)
// when one is given and the window is closed or the message asks for an
// approval.
func FallbackRender(in RenderInput) (*Message, error) {
	env := in.Job.Envelope
	if env == nil {
		return nil, fmt.Errorf("job has no envelope")
	}
	var parts []string
	for _, pt := range []string{envelope.PartResponse, envelope.PartClarify, envelope.PartError} {
		if t := strings.TrimSpace(env.Text(pt)); t != "" {
			parts = append(parts, t)
		}
	}
	msg := &Message{}
	for _, h := range in.Job.Approvals {
		what := h.Request.Summary
		if what == "" {
			what = "Approve " + h.Request.ToolName + "?"
		}
		line := what
		if h.Code != "" {
			line += fmt.Sprintf("\nReply YES %s or NO %s", h.Code, h.Code)
		}
		if h.LinkURL != "" {
			line += "\n" + h.LinkURL
		}
		parts = append(parts, line)
		if in.Channel == envelope.ChannelWhatsApp && len(msg.Buttons) < 3 {
			for _, b := range h.Buttons {
				if len(msg.Buttons) < 3 {
					msg.Buttons = append(msg.Buttons, b)
				}
			}
		}
	}
	msg.Body = strings.Join(parts, "\n\n")
	if len([]rune(msg.Body)) > maxBody {
		r := []rune(msg.Body)
		msg.Body = string(r[:maxBody-1]) + "…"
	}
	if t := in.Template; t != nil && in.Channel == envelope.ChannelWhatsApp && (!in.WindowOpen || len(in.Job.Approvals) > 0) {
		msg.ContentSID = t.ContentSID
		msg.ContentVariables = fillVariables(t, msg.Body, in.Job)
		msg.Body = ""
		msg.Buttons = nil // the template carries them
	}
	return msg, nil
}

// fillVariables resolves a template's variable sources.
func fillVariables(t *ContentTemplate, body string, job *channels.Job) map[string]string {
	if len(t.Variables) == 0 {
		return nil
	}
	var h render.ApprovalHandle
	if len(job.Approvals) > 0 {
		h = job.Approvals[0]
	}
	button := func(i int) string {
		if i < len(h.Buttons) {
			return h.Buttons[i].Payload
		}
		return ""
	}
	out := make(map[string]string, len(t.Variables))
	for k, src := range t.Variables {
		var v string
		switch src {
		case "body":
			v = body
		case "summary":
			v = h.Request.Summary
			if v == "" {
				v = h.Request.ToolName
			}
		case "tool":
			v = h.Request.ToolName
		case "link":
			v = h.LinkURL
		case "code":
			v = h.Code
		case "approval_id":
			v = h.ApprovalID
		case "button1":
			v = button(0)
		case "button2":
			v = button(1)
		case "button3":
			v = button(2)
		}
		out[k] = v
	}
	return out
}
