package console

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
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
	// Messages are the newest it accepted, oldest first.
	Messages []DevMailMessage
}

// DevMailMessage is one message the local mail server accepted: mail
// beachd sent (filed for "you") or mail written to the agent ("agent").
type DevMailMessage struct {
	At        time.Time
	Mailboxes []string
	From      string
	To        []string
	Subject   string
	// ReplyTo is where a reply goes (an approval request's agent+token
	// address); DeliveryID the delivery that sent it, when beachd did.
	ReplyTo, DeliveryID string
	Text                string
	// Cut: the text was longer than what is kept.
	Cut bool
}

// devMailView is a message as the inbox shows it, with the ways to answer
// an approval request found in its text.
type devMailView struct {
	DevMailMessage
	// FromBeachd: filed for the person, so sent by beachd.
	FromBeachd bool
	// Links are the approval pages it links to; Codes the "YES 123456"
	// answers it suggests.
	Links []string
	Codes []string
}

var (
	approvalLinkRe = regexp.MustCompile(`https?://[^\s<>"'()]{1,300}/a/[A-Za-z0-9_-]{8,200}`)
	answerCodeRe   = regexp.MustCompile(`(?i)\b(?:YES|NO|APPROVE|DENY)\s+([0-9]{4,10})\b`)
)

// answers finds, in a message's text, the approval pages it links to
// (those of this beachd, at publicURL/a/…) and the codes it asks to be
// sent back, each once, at most ten of each.
func answers(text, publicURL string) (links, codes []string) {
	seen := map[string]bool{}
	for _, l := range approvalLinkRe.FindAllString(text, 50) {
		if strings.HasPrefix(l, publicURL+"/a/") && !seen[l] && len(links) < 10 {
			seen[l] = true
			links = append(links, l)
		}
	}
	for _, m := range answerCodeRe.FindAllStringSubmatch(text, 50) {
		if !seen[m[1]] && len(codes) < 10 {
			seen[m[1]] = true
			codes = append(codes, m[1])
		}
	}
	return links, codes
}

type devData struct {
	Texts     []DevText
	Webhooks  []DevWebhook
	Decisions []DevDecision
	Mail      DevMail
	MailShown []devMailView // newest first
	Numbers   []string      // recipients of recorded texts, for the reply form
	// Slack: the recorded Slack messages, newest first, when Slack is
	// recorded; SlackUsers the users they went to, for the forms.
	HasSlack   bool
	Slack      []DevSlackMessage
	SlackUsers []string
	// SlackChannel and SlackThread fill the write form when a message's
	// "Answer in this thread" was followed.
	SlackChannel, SlackThread string
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
	for i := len(d.Mail.Messages) - 1; i >= 0; i-- {
		m := devMailView{DevMailMessage: d.Mail.Messages[i]}
		m.FromBeachd = !slices.Contains(m.Mailboxes, "agent")
		m.Links, m.Codes = answers(m.Text, c.cfg.PublicURL)
		d.MailShown = append(d.MailShown, m)
	}
	if ds, ok := c.deps.Dev.(DevSlack); ok {
		d.HasSlack = true
		d.Slack = ds.SlackMessages()
		reverse(d.Slack)
		if len(d.Slack) > devSlackShown {
			d.Slack = d.Slack[:devSlackShown]
		}
		for i := range d.Slack {
			if m := &d.Slack[i]; envelope.SlackUser(m.To) && !m.Ephemeral {
				m.PressAs = m.To
				if !slices.Contains(d.SlackUsers, m.To) {
					d.SlackUsers = append(d.SlackUsers, m.To)
				}
			}
		}
		q := r.URL.Query()
		if ch := q.Get("slack_channel"); envelope.SlackConversation(ch) && ch[0] != 'U' && ch[0] != 'W' {
			d.SlackChannel = ch
		}
		if th := q.Get("slack_thread"); len(th) <= 32 {
			d.SlackThread = th
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
