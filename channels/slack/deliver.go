package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

// RenderFunc renders one job to a Block Kit message (render.Slack).
type RenderFunc func(job *channels.Job, now time.Time) (*render.Slack, error)

// Renderer renders through r, with the delivery's recipient and approval
// handles; fullMessage, when set, links a message cut short to the whole.
func Renderer(r *render.Renderer, reg *envelope.Registry, fullMessage func(deliveryID string) string) RenderFunc {
	return func(j *channels.Job, now time.Time) (*render.Slack, error) {
		if j == nil || j.Envelope == nil || j.Delivery == nil {
			return nil, errors.New("job has no envelope")
		}
		in := render.Input{Envelope: j.Envelope, Registry: reg, DeliveryID: j.Delivery.ID, Approvals: j.Approvals, Now: now,
			Recipient: render.Recipient{Channel: envelope.ChannelSlack, Address: j.Delivery.To},
			Reminder:  j.Delivery.Extra[envelope.ExtraApprovalNotice] == envelope.NoticeReminder}
		if fullMessage != nil {
			in.FullMessageURL = fullMessage(j.Delivery.ID)
		}
		return r.Slack(in)
	}
}

// Blocks converts the renderer's blocks to slack-go's, through their JSON:
// what slack-go cannot read back is refused here, not by Slack.
func Blocks(m *render.Slack) (slack.Blocks, error) {
	b, err := json.Marshal(m.Blocks)
	if err != nil {
		return slack.Blocks{}, err
	}
	var out slack.Blocks
	if err := json.Unmarshal(b, &out); err != nil {
		return slack.Blocks{}, fmt.Errorf("blocks: %w", err)
	}
	if len(out.BlockSet) != len(m.Blocks) {
		return slack.Blocks{}, fmt.Errorf("blocks: %d of %d read back", len(out.BlockSet), len(m.Blocks))
	}
	return out, nil
}

// Store is what the sender keeps: resolved email addresses.
type Store interface {
	store.KV
}

// Config configures the Sender.
type Config struct {
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Sender is the Slack channel's Deliverer.
type Sender struct {
	// pausedUntil is when Slack's last 429 lets the channel post again:
	// until then no job is admitted (Slack's limits are the workspace's).
	mu          sync.Mutex
	pausedUntil time.Time

	client   *Client
	resolver *Resolver
	render   RenderFunc
	now      func() time.Time
	log      *slog.Logger
}

var (
	_ channels.Deliverer       = (*Sender)(nil)
	_ channels.ChannelAdmitter = (*Sender)(nil)
)

// Admit refuses every job while Slack's last Retry-After runs: the jobs
// stay due, unattempted, and go once it has passed.
func (s *Sender) Admit(*store.Delivery) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.now().Before(s.pausedUntil)
}

// Done is Admit's pair; the pause holds no slot.
func (s *Sender) Done(*store.Delivery) {}

// RefusesChannel: a pause holds for every Slack job.
func (s *Sender) RefusesChannel() {}

// failed classifies err and, when Slack asked to slow down, pauses the
// channel for as long as it asked.
func (s *Sender) failed(err error, sent bool) *channels.Error {
	e := classify(err, sent)
	if e.RateLimited {
		s.mu.Lock()
		if until := s.now().Add(e.RetryAfter); until.After(s.pausedUntil) {
			s.pausedUntil = until
		}
		s.mu.Unlock()
		s.log.Warn("slack: rate limited; the channel waits as Slack asks", "retry_after", e.RetryAfter)
	}
	return e
}

// NewSender builds the deliverer.
func NewSender(cfg Config, client *Client, st Store, render RenderFunc, log *slog.Logger) (*Sender, error) {
	if client == nil || st == nil || render == nil {
		return nil, errors.New("slack sender: client, store and renderer are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sender{client: client, resolver: NewResolver(client, st), render: render, now: cfg.Now, log: log}, nil
}

// Deliver renders and posts one job. A job that may have been sent and
// whose ts was recorded is not sent again.
func (s *Sender) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	d := job.Delivery
	if d.MaybeSent && d.ProviderID != "" {
		ch, ts, _ := strings.Cut(d.ProviderID, "/")
		return &channels.Result{ProviderID: d.ProviderID, FollowDecision: len(d.ApprovalIDs) > 0, Receipt: channels.Receipt{
			Data: map[string]any{"channel": ch, "ts": ts}, Meta: map[string]any{"source": "slack", "recovered": true}}}, nil
	}
	msg, err := s.render(job, s.now())
	if err != nil {
		return nil, channels.Permanent(fmt.Errorf("render: %w", err))
	}
	blocks, err := Blocks(msg)
	if err != nil {
		return nil, channels.Permanent(err)
	}
	if where := d.Extra[ExtraUpdate]; where != "" {
		if err := s.update(ctx, where, msg, blocks); err != nil {
			return nil, err
		}
		return &channels.Result{ProviderID: where, Receipt: channels.Receipt{Data: map[string]any{"ok": true, "updated": where},
			Meta: map[string]any{"source": "slack", "update": true}}}, nil
	}
	to, err := s.resolver.Resolve(ctx, d.To)
	if err != nil {
		return nil, err
	}
	ch, ts, err := s.client.Post(ctx, to, Message{Text: msg.Text, Blocks: blocks, ThreadTS: d.Extra[ExtraThreadTS], DeliveryID: d.ID})
	if err != nil {
		return nil, s.failed(err, true)
	}
	data := map[string]any{"ok": true, "channel": ch, "ts": ts}
	if to != d.To {
		data["user"] = to
	}
	// A message asking approvals decided before its ts is recorded (before
	// the post, or while it was on its way) is rewritten by a follow-up
	// that its record writes (FollowDecision): the decision's own found no
	// message to rewrite.
	return &channels.Result{ProviderID: ch + "/" + ts, FollowDecision: len(d.ApprovalIDs) > 0, Receipt: channels.Receipt{Data: data,
		Meta: map[string]any{"source": "slack", "blocks": len(msg.Blocks), "truncated": msg.Truncated}}}, nil
}

// ExtraThreadTS is the delivery Extra key of the thread a message answers
// in (a conversation's thread_ts).
const ExtraThreadTS = envelope.ExtraThreadTS
