package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// MaxRequestBytes bounds a request from Slack (a click carries the whole
// message it was on: 50 blocks at most).
const MaxRequestBytes = 1 << 20

// Decider takes an inbound message: approvals, then conversations.
type Decider interface {
	HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error)
}

// Noter shows a note to one user in a conversation (chat.postEphemeral).
type Noter interface {
	Ephemeral(ctx context.Context, channel, user, text string) error
}

// InteractionConfig configures the interactivity endpoint.
type InteractionConfig struct {
	SigningSecret string
	// TeamID, when set, is the only workspace whose clicks count; a click
	// from another is refused.
	TeamID string
	Now    func() time.Time
}

// InteractionHandler serves POST /v1/inbound/slack/interactions.
type InteractionHandler struct {
	cfg      InteractionConfig
	decider  Decider
	notes    Noter
	resolver *Resolver
	log      *slog.Logger
}

// NewInteractionHandler builds the handler; notes may be nil (no notes are
// shown), resolver may be nil (no email aliases are known).
func NewInteractionHandler(cfg InteractionConfig, d Decider, notes Noter, resolver *Resolver, log *slog.Logger) (*InteractionHandler, error) {
	if cfg.SigningSecret == "" || d == nil {
		return nil, errors.New("slack interactions: a signing secret and a decider are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &InteractionHandler{cfg: cfg, decider: d, notes: notes, resolver: resolver, log: log}, nil
}

// Click is one press of one of beachd's buttons, as read from Slack's
// block_actions payload.
type Click struct {
	Team, User, Channel, MessageTS, ActionTS string
	ActionID, Value                          string
}

// ParseInteraction reads Slack's interactivity body (a form whose payload
// field is JSON) and returns the presses of beachd's buttons it carries;
// other interactions are not errors, they carry no click. Every field is
// bounded; a body that is not Slack's shape is an error naming what is
// wrong.
func ParseInteraction(body []byte) ([]Click, error) {
	if len(body) > MaxRequestBytes {
		return nil, fmt.Errorf("body of %d bytes; at most %d", len(body), MaxRequestBytes)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("not a form: %v", err)
	}
	raw := form.Get("payload")
	if raw == "" {
		return nil, errors.New("no payload field")
	}
	var p struct {
		Type      string              `json:"type"`
		User      struct{ ID string } `json:"user"`
		Team      struct{ ID string } `json:"team"`
		Channel   struct{ ID string } `json:"channel"`
		Container struct {
			MessageTS string `json:"message_ts"`
			ChannelID string `json:"channel_id"`
		} `json:"container"`
		Actions []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			ActionTS string `json:"action_ts"`
		} `json:"actions"`
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return nil, fmt.Errorf("payload is not JSON: %v", err)
	}
	if p.Type != "block_actions" {
		return nil, nil
	}
	ch := p.Channel.ID
	if ch == "" {
		ch = p.Container.ChannelID
	}
	var out []Click
	for _, a := range p.Actions {
		if a.ActionID != render.SlackActionApprove && a.ActionID != render.SlackActionDeny {
			continue
		}
		c := Click{Team: p.Team.ID, User: p.User.ID, Channel: ch, MessageTS: p.Container.MessageTS,
			ActionTS: a.ActionTS, ActionID: a.ActionID, Value: a.Value}
		if !envelope.SlackUser(c.User) {
			return nil, fmt.Errorf("user.id %q is not a Slack user id", trunc(c.User))
		}
		if len(c.Value) > render.SlackMaxButtonValue || len(c.Team) > 32 || len(c.Channel) > 32 || len(c.MessageTS) > 32 || len(c.ActionTS) > 32 {
			return nil, errors.New("a field is longer than Slack makes it")
		}
		out = append(out, c)
		if len(out) == 5 {
			break // a message has two of our buttons per approval; five is plenty
		}
	}
	return out, nil
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func (h *InteractionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if len(body) > MaxRequestBytes {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	// The signature first: nothing of an unsigned request is read.
	if err := Verify(r.Header, body, h.cfg.SigningSecret, h.cfg.Now()); err != nil {
		h.log.Warn("slack interaction refused", "reason", err.Error())
		http.Error(w, "signature", http.StatusUnauthorized)
		return
	}
	clicks, err := ParseInteraction(body)
	if err != nil {
		h.log.Warn("slack interaction unreadable", "reason", err.Error())
		http.Error(w, "payload: "+err.Error(), http.StatusBadRequest)
		return
	}
	for _, c := range clicks {
		h.click(r.Context(), c)
	}
	// Slack waits 3 s: an empty 200 acknowledges; the message is rewritten
	// by the update that follows a decision.
	w.WriteHeader(http.StatusOK)
}

// click hands one press to the decider and shows the user a note when it
// decided nothing.
func (h *InteractionHandler) click(ctx context.Context, c Click) {
	log := h.log.With("channel", envelope.ChannelSlack, "slack_user", c.User)
	if h.cfg.TeamID != "" && c.Team != h.cfg.TeamID {
		log.Warn("slack click from another workspace refused", "team", c.Team)
		h.note(ctx, c, "This button belongs to another workspace's message; nothing was decided.")
		return
	}
	in := envelope.Inbound{Channel: envelope.ChannelSlack, From: c.User, To: c.Channel, ButtonPayload: c.Value,
		// A click replayed (the same request again) has the same
		// action_ts: it has no second effect.
		MessageID:  "slack-click:" + c.Channel + ":" + c.User + ":" + c.ActionTS,
		ReceivedAt: h.cfg.Now(), Recipients: []string{c.Channel}}
	if h.resolver != nil {
		if emails, err := h.resolver.EmailsOf(ctx, c.User); err == nil {
			in.SenderAliases = emails
		}
	}
	res, err := h.decider.HandleInbound(ctx, in)
	if err != nil {
		log.Error("slack click", "err", err)
		h.note(ctx, c, "Something went wrong recording your answer; please try again in a minute.")
		return
	}
	log.Info("slack click", "outcome", res.Outcome, "approval_id", res.ApprovalID)
	if text := noteFor(res); text != "" {
		h.note(ctx, c, text)
	}
}

// noteFor is what the user who clicked is told when the click decided
// nothing (a decision rewrites the message instead).
func noteFor(res envelope.InboundResult) string {
	switch res.Outcome {
	case "decided", "duplicate":
		return ""
	case "already-decided":
		verb := "approved"
		if res.Decision == envelope.DecisionDenied {
			verb = "denied"
		}
		return "This request was already " + verb + "; your answer changed nothing."
	case "expired":
		return "This request has expired; your answer changed nothing."
	case "wrong-sender":
		return "This request is not yours to decide; nothing was recorded."
	case "unknown-token", "no-token":
		return "This button no longer answers anything; nothing was recorded."
	case "counted":
		return "Recorded: your answer counts toward the approvals this request needs; it waits for the others."
	case "second-vote":
		return "Your answer to this request was already recorded; this one changed nothing."
	}
	// An outcome this channel does not know (a vote an approval policy
	// counts, say) is named as it is, neither claimed nor denied.
	return "Your answer: " + res.Outcome + "."
}

func (h *InteractionHandler) note(ctx context.Context, c Click, text string) {
	if h.notes == nil || c.Channel == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := h.notes.Ephemeral(ctx, c.Channel, c.User, render.SlackEscape(text)); err != nil {
		h.log.Warn("slack note", "err", err)
	}
}

// EmailsOf lists the email addresses resolved to user before.
func (r *Resolver) EmailsOf(ctx context.Context, user string) ([]string, error) {
	v, ok, err := r.kv.GetKV(ctx, emailKey(user))
	if err != nil || !ok {
		return nil, err
	}
	return strings.Fields(string(v)), nil
}
