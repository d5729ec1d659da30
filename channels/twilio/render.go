package twilio

import (
	"fmt"
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
	// Template is the WhatsApp content template to send instead of a
	// free-form body; nil sends free-form.
	Template *render.ContentTemplate
	// ShowButtons keeps quick-reply buttons on a free-form WhatsApp
	// message (the dev recorder shows them; Twilio's Messages API cannot
	// send them without a content template).
	ShowButtons bool
}

// Message is a rendition ready to send.
type Message struct {
	// Bodies are the texts to send, in order: one, or an SMS split into
	// several messages by the renderer's split policy.
	Bodies    []string
	Buttons   []render.Button
	MediaURLs []string
	// ContentSID and ContentVariables send a WhatsApp content template
	// instead of a body.
	ContentSID       string
	ContentVariables map[string]string

	// textFallback renders the text the message replaces (quick-reply
	// content whose message Twilio refuses).
	textFallback func() (*Message, error)
}

// RenderFunc renders a job for a channel. Renderer adapts the render
// package; tests may substitute their own.
type RenderFunc func(in RenderInput) (*Message, error)

// Renderer renders through r: render.SMS and render.WhatsApp, with the
// delivery's recipient, approval handles and the WhatsApp window.
// fullMessage, when set, gives the link to a delivery's whole message,
// which a message cut short ends with.
func Renderer(r *render.Renderer, reg *envelope.Registry, fullMessage func(deliveryID string) string) RenderFunc {
	return func(in RenderInput) (*Message, error) {
		j := in.Job
		if j == nil || j.Envelope == nil || j.Delivery == nil {
			return nil, fmt.Errorf("job has no envelope")
		}
		ri := render.Input{
			Envelope:   j.Envelope,
			Registry:   reg,
			Recipient:  render.Recipient{Channel: in.Channel, Address: j.Delivery.To},
			DeliveryID: j.Delivery.ID,
			Approvals:  j.Approvals,
			Now:        in.Now,
			Reminder:   j.Delivery.Extra[envelope.ExtraApprovalNotice] == envelope.NoticeReminder,
		}
		if fullMessage != nil {
			ri.FullMessageURL = fullMessage(j.Delivery.ID)
		}
		switch in.Channel {
		case envelope.ChannelSMS:
			s, err := r.SMS(ri)
			if err != nil {
				return nil, err
			}
			m := &Message{Bodies: []string{s.Body}}
			if len(s.Parts) > 0 {
				m.Bodies = s.Parts
			}
			return m, nil
		case envelope.ChannelWhatsApp:
			// The renderer uses the template when the window is closed. A
			// quick-reply approval needs its template inside the window
			// too: the Messages API sends buttons only through one.
			ri.WhatsAppWindowOpen = in.WindowOpen && in.Template == nil
			ri.WhatsAppTemplate = in.Template
			if in.Template == nil && !in.ShowButtons {
				// Free-form: no buttons can go with it, so the renderer
				// must print the text answer (code or link) instead of
				// "tap a button".
				hs := make([]render.ApprovalHandle, len(ri.Approvals))
				copy(hs, ri.Approvals)
				for i := range hs {
					hs[i].Buttons = nil
				}
				ri.Approvals = hs
			}
			w, err := r.WhatsApp(ri)
			if err != nil {
				return nil, err
			}
			m := &Message{Buttons: w.Buttons, MediaURLs: w.MediaURLs, ContentSID: w.ContentSID, ContentVariables: w.ContentVariables}
			if w.ContentSID == "" && w.Body != "" {
				m.Bodies = []string{w.Body}
			}
			return m, nil
		}
		return nil, fmt.Errorf("channel %q is not sms or whatsapp", in.Channel)
	}
}
