package twilio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	contentapi "github.com/twilio/twilio-go/rest/content/v1"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// contentAPI is the part of Twilio's Content API the WhatsApp deliverer
// uses.
type contentAPI interface {
	CreateContent(ctx context.Context, req *contentapi.ContentCreateRequest) (*contentapi.ContentV1Content, *callInfo, error)
}

var _ contentAPI = (*Client)(nil)

// CreateContent creates one content (POST https://content.twilio.com/v1/Content).
func (c *Client) CreateContent(ctx context.Context, req *contentapi.ContentCreateRequest) (*contentapi.ContentV1Content, *callInfo, error) {
	api, info := c.contentService(ctx)
	m, err := api.CreateContent((&contentapi.CreateContentParams{}).SetContentCreateRequest(*req))
	return m, info, err
}

// contentSID is the shape of a content SID.
var contentSID = regexp.MustCompile(`^HX[0-9a-fA-F]{32}$`)

// templateWindow is the value of Extra "template" that asks for the
// WhatsApp window template.
const templateWindow = "window"

// quickRetry is how long after a failed creation of quick-reply content
// approvals go out as text without trying again.
const quickRetry = 5 * time.Minute

// message is what a delivery sends: the window template it asks for, or
// its rendition (a template's content, quick-reply content, or text).
func (s *sender) message(ctx context.Context, job *channels.Job) (*Message, error) {
	d := job.Delivery
	to := d.To
	if t := d.Extra[envelope.ExtraTemplate]; t != "" {
		switch {
		case t != templateWindow:
			return nil, channels.Permanent(fmt.Errorf("%w: %q", ErrUnknownTemplate, truncate(t, 40)))
		case s.window() <= 0:
			return nil, channels.Permanent(fmt.Errorf("%w: the window template is for a channel with an answer window, which %s has not", ErrUnknownTemplate, s.channel))
		case s.cfg.WindowTemplate == "":
			return nil, channels.Permanent(ErrNoWindowTemplate)
		}
		return &Message{ContentSID: s.cfg.WindowTemplate}, nil
	}
	in := RenderInput{Channel: s.channel, Job: job, Now: s.cfg.Now(), WindowOpen: true}
	quick := false
	if s.channel == envelope.ChannelWhatsApp {
		ours, err := s.fromFor(d)
		if err != nil {
			return nil, channels.Permanent(err)
		}
		open, err := s.windowOpen(ctx, strings.TrimPrefix(ours, "whatsapp:"), to)
		if err != nil {
			return nil, channels.Temporary(fmt.Errorf("read whatsapp window: %w", err))
		}
		in.WindowOpen = open
		switch {
		case len(job.Approvals) > 0 && s.cfg.Templates.Approval != nil:
			in.Template = s.cfg.Templates.Approval
		case !open && s.cfg.Templates.Result != nil:
			in.Template = s.cfg.Templates.Result
		case !open:
			return nil, channels.Permanent(ErrOutsideWindow)
		case len(job.Approvals) > 0 && !s.cfg.NoQuickReplies:
			quick, in.ShowButtons = true, true
		}
	}
	msg, err := s.render(in)
	if err != nil {
		return nil, channels.Permanent(fmt.Errorf("render %s: %w", s.channel, err))
	}
	if !quick || msg.ContentSID != "" || len(msg.Buttons) == 0 || len(msg.MediaURLs) > 0 || len(msg.Bodies) != 1 {
		if quick {
			in.ShowButtons = false
			return s.renderOrFail(in)
		}
		return msg, nil
	}
	sid, err := s.quickReply(ctx, msg.Buttons)
	if err != nil {
		// Text with a code answers the approval as well as buttons do.
		s.log.Warn("whatsapp quick-reply content unavailable; approval sent as text", "delivery_id", d.ID, "err", err)
		in.ShowButtons = false
		return s.renderOrFail(in)
	}
	vars := map[string]string{"1": msg.Bodies[0]}
	for i, b := range msg.Buttons {
		vars[strconv.Itoa(i+2)] = b.Payload
	}
	in.ShowButtons = false
	return &Message{ContentSID: sid, ContentVariables: vars, Buttons: msg.Buttons,
		textFallback: func() (*Message, error) { return s.renderOrFail(in) }}, nil
}

func (s *sender) renderOrFail(in RenderInput) (*Message, error) {
	msg, err := s.render(in)
	if err != nil {
		return nil, channels.Permanent(fmt.Errorf("render %s: %w", s.channel, err))
	}
	return msg, nil
}

// quickContent is the quick-reply content for buttons with these titles:
// the body is variable 1, button i's id (the payload the webhook reads
// back as ButtonPayload) variable i+2. Its name carries a hash of the
// definition, which is also its Store key.
func quickContent(buttons []render.Button) (*contentapi.ContentCreateRequest, string) {
	h := sha256.New()
	h.Write([]byte("quick-reply/v1"))
	actions := make([]contentapi.QuickReplyAction, len(buttons))
	vars := map[string]string{"1": "Approve this request?"}
	for i, b := range buttons {
		n := strconv.Itoa(i + 2)
		actions[i] = contentapi.QuickReplyAction{Type: contentapi.QUICKREPLYACTIONTYPE_QUICK_REPLY, Title: b.Title, Id: "{{" + n + "}}"}
		vars[n] = "apr_example:" + n
		h.Write([]byte{0})
		h.Write([]byte(b.Title))
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	return &contentapi.ContentCreateRequest{
		FriendlyName: "beachd_approval_" + sum,
		Language:     "en",
		Variables:    vars,
		Types:        contentapi.Types{TwilioQuickReply: &contentapi.TwilioQuickReply{Body: "{{1}}", Actions: actions}},
	}, "twilio-content/quick-reply/" + sum
}

// quickReply returns the SID of the quick-reply content for buttons: the
// one the Store keeps, or a new one created through the Content API (and
// then kept).
func (s *sender) quickReply(ctx context.Context, buttons []render.Button) (string, error) {
	req, key := quickContent(buttons)
	s.quick.Lock()
	defer s.quick.Unlock()
	if v, ok, err := s.store.GetKV(ctx, key); err != nil {
		return "", fmt.Errorf("read cached quick-reply content: %w", err)
	} else if ok && contentSID.Match(v) {
		return string(v), nil
	}
	if now := s.cfg.Now(); now.Before(s.quickFailed) {
		return "", fmt.Errorf("creating quick-reply content failed less than %s ago", quickRetry)
	}
	c, info, err := s.content.CreateContent(ctx, req)
	if err == nil && (c == nil || !contentSID.MatchString(deref(c.Sid))) {
		err = errors.New("the Content API answered without a content SID")
	}
	if err != nil {
		s.quickFailed = s.cfg.Now().Add(quickRetry)
		e := classify(ctx, err, info, false)
		return "", fmt.Errorf("create quick-reply content: %w", e.Err)
	}
	sid := *c.Sid
	if err := s.store.PutKV(context.WithoutCancel(ctx), key, []byte(sid)); err != nil {
		// Used all the same; the next approval creates another.
		s.log.Warn("cache quick-reply content", "content_sid", sid, "err", err)
	}
	s.log.Info("created whatsapp quick-reply content", "content_sid", sid, "buttons", strings.Join(titles(buttons), ","))
	return sid, nil
}

func titles(bs []render.Button) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Title
	}
	return out
}
