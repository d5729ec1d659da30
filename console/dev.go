package console

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// DevInbox is what `beachd dev` recorded instead of sending: text messages,
// webhooks its sink received, what the dev agent was told, and where the
// local mail server is. Reply answers as a phone would.
type DevInbox interface {
	Texts() []DevText
	Webhooks() []DevWebhook
	AgentReceived() []DevDecision
	Mail() DevMail
	Reply(ctx context.Context, channel, from, body, buttonPayload string) error
}

// DevText is one recorded SMS or WhatsApp message.
type DevText struct {
	Channel, To, Body, DeliveryID string
	Buttons                       []DevButton
	At                            time.Time
}

// DevButton is a WhatsApp quick-reply button.
type DevButton struct{ Title, Payload string }

// DevWebhook is one webhook the dev sink received.
type DevWebhook struct {
	ID, Type, DeliveryID, Error string
	Verified, Duplicate         bool
	Bytes                       int
	At                          time.Time
	Text                        string // the envelope's first text, shortened
}

// DevDecision is one approval decision the dev agent received.
type DevDecision struct {
	ApprovalID, Decision, Reason, DecidedBy string
	At                                      time.Time
}

// DevMail says where the local mail server listens and what it holds.
type DevMail struct {
	Lines []string
	// Received counts the messages it accepted.
	Received int
}

type devData struct {
	Texts     []DevText
	Webhooks  []DevWebhook
	Decisions []DevDecision
	Mail      DevMail
	Numbers   []string // recipients of recorded texts, for the reply form
}

func (c *Console) devInbox(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Dev == nil {
		c.fail(w, r, id, http.StatusNotFound, "The dev inbox exists only in beachd dev.")
		return
	}
	d := devData{Texts: c.deps.Dev.Texts(), Webhooks: c.deps.Dev.Webhooks(), Decisions: c.deps.Dev.AgentReceived(), Mail: c.deps.Dev.Mail()}
	seen := map[string]bool{}
	for i := len(d.Texts) - 1; i >= 0; i-- {
		if t := d.Texts[i]; !seen[t.To] {
			seen[t.To] = true
			d.Numbers = append(d.Numbers, t.To)
		}
	}
	reverse(d.Texts)
	reverse(d.Webhooks)
	reverse(d.Decisions)
	c.render(w, http.StatusOK, "dev", c.newPage(r, id, "dev", "Dev inbox", d))
}

func reverse[T any](xs []T) {
	for i, j := 0, len(xs)-1; i < j; i, j = i+1, j-1 {
		xs[i], xs[j] = xs[j], xs[i]
	}
}

func (c *Console) devReply(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Dev == nil {
		c.fail(w, r, id, http.StatusNotFound, "The dev inbox exists only in beachd dev.")
		return
	}
	f := r.PostForm
	ch := f.Get("channel")
	if ch != "sms" && ch != "whatsapp" {
		c.fail(w, r, id, http.StatusBadRequest, "Choose SMS or WhatsApp.")
		return
	}
	from := strings.TrimSpace(f.Get("from"))
	body, payload := strings.TrimSpace(f.Get("body")), f.Get("button_payload")
	if from == "" || body == "" && payload == "" || len(body) > 1600 || len(from) > 32 {
		c.fail(w, r, id, http.StatusBadRequest, "A reply needs the number it comes from and a text (at most 1,600 characters).")
		return
	}
	if err := c.deps.Dev.Reply(r.Context(), ch, from, body, payload); err != nil {
		c.fail(w, r, id, http.StatusBadRequest, "The reply was not accepted: "+err.Error())
		return
	}
	done(w, r, "/ui/dev", "replied")
}
