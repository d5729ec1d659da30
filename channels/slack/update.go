package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

// ExtraUpdate is the delivery Extra key that makes a Slack delivery
// rewrite a message ("<channel>/<ts>", a delivery's provider id) with
// chat.update instead of posting a new one. The update is an ordinary
// delivery: durable, retried and dead-lettered like any other.
const ExtraUpdate = "slack_update"

// UpdaterStore is what the Updater reads: the envelope an approval came
// in, and its deliveries.
type UpdaterStore interface {
	Envelope(ctx context.Context, id string) (*store.EnvelopeRecord, error)
	Delivery(ctx context.Context, id string) (*store.Delivery, error)
}

// Enqueuer queues deliveries with Extra keys (api.Ingester.EnqueueReply).
type Enqueuer interface {
	EnqueueReply(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, extra map[string]string, agent, source string) (string, error)
}

// Updater rewrites the Slack messages of an approval once it is decided,
// whoever decided it and on whatever channel: their buttons give way to a
// line saying what was decided, by whom and when.
type Updater struct {
	DB      UpdaterStore
	Enqueue Enqueuer
	Now     func() time.Time
	Log     *slog.Logger
}

// ApprovalDecided queues an update of every Slack message sent for a's
// request that Slack accepted. A message whose ts is recorded after this
// read of the deliveries is rewritten by MessageShown, from the follow-up
// its record writes. Errors are logged: a decision never fails because a
// message could not be rewritten.
func (u *Updater) ApprovalDecided(ctx context.Context, a *store.Approval) {
	if a == nil || a.State == store.ApprovalPending {
		return
	}
	rec, err := u.DB.Envelope(ctx, a.EnvelopeID)
	if err != nil {
		u.log().Warn("slack update: read envelope", "approval_id", a.ID, "err", err)
		return
	}
	for _, id := range rec.DeliveryIDs {
		u.rewrite(ctx, a, id)
	}
}

// MessageShown queues the update of one Slack message of a, decided before
// the message's ts was recorded (the update after the decision did not
// know it).
func (u *Updater) MessageShown(ctx context.Context, a *store.Approval, deliveryID string) {
	if a == nil || a.State == store.ApprovalPending {
		return
	}
	u.rewrite(ctx, a, deliveryID)
}

func (u *Updater) log() *slog.Logger {
	if u.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return u.Log
}

// rewrite queues the update of delivery id's message, if it is a Slack
// message of a that Slack accepted.
func (u *Updater) rewrite(ctx context.Context, a *store.Approval, id string) {
	d, err := u.DB.Delivery(ctx, id)
	if err != nil {
		u.log().Warn("slack update: read delivery", "approval_id", a.ID, "delivery_id", id, "err", err)
		return
	}
	if d.Channel != envelope.ChannelSlack || d.ProviderID == "" || !slices.Contains(d.ApprovalIDs, a.ID) {
		return
	}
	now := time.Now
	if u.Now != nil {
		now = u.Now
	}
	text := DecidedText(a)
	env := &envelope.Envelope{Role: "agent", Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": envelope.PartResponse}}},
		Meta: envelope.Meta{SessionID: "beachd-approvals", TurnID: "slack-update-" + a.ID, ProducedAt: now().UTC(), FinalizedBy: "complete"}}
	if _, err := u.Enqueue.EnqueueReply(ctx, env, []envelope.Recipient{{Channel: envelope.ChannelSlack, Address: d.To}},
		map[string]string{ExtraUpdate: d.ProviderID}, "", "approvals"); err != nil {
		u.log().Error("slack update: enqueue", "approval_id", a.ID, "delivery_id", id, "err", err)
	}
}

// DecidedText says what became of an approval, for the message that asked.
func DecidedText(a *store.Approval) string {
	var req envelope.ApprovalRequest
	_ = json.Unmarshal(a.Request, &req)
	what := strings.TrimSpace(req.Summary)
	if what == "" {
		what = "Run " + req.ToolName
	}
	what = clipRunes(what, 500)
	var verb string
	switch a.State {
	case store.ApprovalGranted:
		verb = "Approved"
	case store.ApprovalDenied:
		verb = "Denied"
	case store.ApprovalExpired:
		verb = "Expired without an answer (denied)"
	default:
		verb = "Withdrawn"
	}
	s := "**" + verb + "**"
	if a.State == store.ApprovalGranted || a.State == store.ApprovalDenied {
		if a.DecidedBy != "" {
			s += " by " + a.DecidedBy
		}
		if a.Channel != "" {
			s += " (" + a.Channel + ")"
		}
	}
	if !a.DecidedAt.IsZero() {
		s += " on " + a.DecidedAt.UTC().Format("Mon 2 Jan 2006, 15:04 MST")
	}
	s += ": " + what
	if r := strings.TrimSpace(a.Reason); r != "" && a.State != store.ApprovalExpired {
		s += "\nReason: " + clipRunes(r, 500)
	}
	return s
}

// clipRunes cuts s to n runes, with "…" when cut (a decided message stays
// within a section's 3,000 characters).
func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// DecidedMessage is the message an approval's Slack message becomes: the
// decision as one section, no buttons (tests and previews).
func DecidedMessage(summary, decision, decidedBy, reason string, at time.Time) (Message, error) {
	a := &store.Approval{State: decision, DecidedBy: decidedBy, DecidedAt: at, Reason: reason, Channel: envelope.ChannelSlack}
	a.Request, _ = json.Marshal(envelope.ApprovalRequest{Summary: summary})
	text := render.SlackEscape(strings.ReplaceAll(DecidedText(a), "**", "*"))
	blocks, err := Blocks(&render.Slack{Text: text, Blocks: []render.SlackBlock{{Type: "section", Text: &render.SlackText{Type: "mrkdwn", Text: text}}}})
	if err != nil {
		return Message{}, err
	}
	return Message{Text: text, Blocks: blocks}, nil
}

// update rewrites the message named by where ("<channel>/<ts>").
func (s *Sender) update(ctx context.Context, where string, msg *render.Slack, blocks slack.Blocks) error {
	ch, ts, ok := strings.Cut(where, "/")
	if !ok || ch == "" || ts == "" {
		return errors.New("slack update: " + fmt.Sprintf("%q is not <channel>/<ts>", where))
	}
	if err := s.client.Update(ctx, ch, ts, Message{Text: msg.Text, Blocks: blocks}); err != nil {
		return s.failed(err, false)
	}
	return nil
}
