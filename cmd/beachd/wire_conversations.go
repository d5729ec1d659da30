package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/channels/twilio"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/conversations"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// wireConversations builds the conversations router when an agent has
// inbound addresses (agents.NAME.inbound): it takes every inbound message
// before approvals do (and offers it to them first), so it becomes the
// decider of the IMAP intake and the Twilio webhook, which are wired after
// it.
func (a *app) wireConversations() error {
	inbound := a.cfg.InboundAgents()
	if len(inbound) == 0 {
		return nil
	}
	if a.inbound == nil || a.agents == nil {
		return errors.New("conversations need approvals and the agent client")
	}
	agents := make(map[string]conversations.AgentConfig, len(inbound))
	limits := make(map[string]conversations.TurnLimits, len(inbound))
	turnLimits := a.cfg.InboundTurnLimits()
	for name, in := range inbound {
		agents[name] = conversations.AgentConfig(in)
		limits[name] = conversations.TurnLimits(turnLimits[name])
	}
	metrics, err := conversations.NewMetrics(a.metrics)
	if err != nil {
		return err
	}
	r, err := conversations.New(conversations.Config{
		Agents:            agents,
		TurnLimits:        limits,
		OwnAddresses:      a.cfg.InboundOwnAddresses(),
		Now:               a.now,
		AttachmentURLBase: a.cfg.PublicURL,
		URLKey:            a.conversationKey("attachment links"),
		Metrics:           metrics,
		Enqueue:           lateEnqueuer{a},
		Media:             lateMedia{a},
		Shared:            a.db.Shared(),
	}, a.db, a.inbound, a.agents, lateNotifier{a}, a.log.With("component", "conversations"))
	if err != nil {
		return err
	}
	a.conversations = r
	a.onWake(store.WakeTurns, r.Wake)
	a.inbound = r
	names := make(map[string]bool, len(a.cfg.Agents))
	for n := range a.cfg.Agents {
		names[n] = true
	}
	a.routes = append(a.routes, api.ConversationRoutes(routerViews{r}, names, a.log.With("component", "api"))...)
	a.routes = append(a.routes, api.TurnRoutes(routerViews{r}, a.log.With("component", "api"))...)
	a.workers = append(a.workers, worker{name: "conversations", run: r.Run})
	if a.dev {
		var addrs []string
		for _, in := range inbound {
			addrs = append(addrs, in.Email...)
			addrs = append(addrs, in.SMS...)
		}
		sort.Strings(addrs)
		for _, ad := range addrs {
			a.banner = append(a.banner, fmt.Sprintf("write to     %s   (the dev agent answers)", ad))
		}
	}
	return nil
}

// conversationKey derives a key of its own for one use of the approvals
// secret (the signed reply addresses of email answers, the signed links
// of attachments).
func (a *app) conversationKey(use string) []byte { return deriveConversationKey(a.linkSecret, use) }

func deriveConversationKey(secret []byte, use string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("beachd conversations: " + use))
	return m.Sum(nil)
}

var _ conversations.MediaFetcher = (*twilio.Client)(nil)

// conversationsAPI returns the router as the API reads it, or nil when
// conversations are not configured.
func (a *app) conversationsAPI() api.Conversations {
	if a.conversations == nil {
		return nil
	}
	return routerViews{a.conversations}
}

// lateNotifier wakes the dispatcher, which is built after the router.
type lateNotifier struct{ a *app }

var _ conversations.Sender = lateNotifier{}

func (l lateNotifier) Notify() {
	if l.a.dispatcher != nil {
		l.a.dispatcher.Notify()
	}
}

// lateMedia fetches Twilio media through the Twilio client, which is built
// after the router (and only when Twilio is configured).
type lateMedia struct{ a *app }

var _ conversations.MediaFetcher = lateMedia{}

func (l lateMedia) FetchMedia(ctx context.Context, url string, max int64) ([]byte, string, error) {
	if l.a.media == nil {
		return nil, "", errors.New("twilio is not configured: its media cannot be fetched")
	}
	return l.a.media.FetchMedia(ctx, url, max)
}

// routerViews is the conversations router as the API and the console
// read it: the API has views of its own.
type routerViews struct{ r *conversations.Router }

var _ api.Conversations = routerViews{}

func (c routerViews) ListInbound(ctx context.Context, q api.InboundQuery) ([]api.InboundItem, string, error) {
	recs, next, err := c.r.ListInbound(ctx, conversations.InboundFilter{Disposition: q.Disposition, Channel: q.Channel,
		Agent: q.Agent, Limit: q.Limit, After: q.After})
	if err != nil {
		return nil, "", err
	}
	out := make([]api.InboundItem, 0, len(recs))
	for _, r := range recs {
		out = append(out, inboundItem(r))
	}
	return out, next, nil
}

func inboundItem(r *store.InboundRecord) api.InboundItem {
	it := api.InboundItem{ID: r.ID, Channel: r.Channel, From: r.From, To: r.To, MessageID: r.MessageID, Subject: r.Subject,
		Text: r.Text, ReceivedAt: r.ReceivedAt, Disposition: r.Disposition, Reason: r.Reason, Agent: r.Agent,
		ConversationID: r.ConversationID, ApprovalID: r.ApprovalID, TurnID: r.TurnID}
	for _, at := range r.Attachments {
		it.Attachments = append(it.Attachments, api.AttachmentItem{Filename: at.Filename, MediaType: at.MediaType, Size: at.Size, URL: at.URL})
	}
	return it
}

var _ api.HeldReleaser = routerViews{}

// ReleaseInbound lets a held message start its turn now.
func (c routerViews) ReleaseInbound(ctx context.Context, id string) (*api.InboundItem, error) {
	rec, err := c.r.ReleaseInbound(ctx, id)
	if err != nil {
		return nil, err
	}
	it := inboundItem(rec)
	return &it, nil
}

func conversationItem(c *store.Conversation) api.ConversationItem {
	return api.ConversationItem{ID: c.ID, Agent: c.Agent, Channel: c.Channel, OurAddress: c.OurAddress, Participants: c.Participants,
		Subject: c.Subject, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, LastInboundAt: c.LastInboundAt, Turns: c.Turns}
}

func (c routerViews) ListConversations(ctx context.Context, q api.ConversationQuery) ([]api.ConversationItem, string, error) {
	cs, next, err := c.r.ListConversations(ctx, conversations.ConversationFilter{Agent: q.Agent, Channel: q.Channel, Limit: q.Limit, After: q.After})
	if err != nil {
		return nil, "", err
	}
	out := make([]api.ConversationItem, 0, len(cs))
	for _, cv := range cs {
		out = append(out, conversationItem(cv))
	}
	return out, next, nil
}

func (c routerViews) Conversation(ctx context.Context, id string) (*api.ConversationDetail, error) {
	d, err := c.r.Conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &api.ConversationDetail{Conversation: conversationItem(d.Conversation)}
	for _, m := range d.Messages {
		out.Messages = append(out.Messages, api.Message{At: m.At, Direction: m.Direction, InboundID: m.InboundID,
			DeliveryID: m.DeliveryID, Text: m.Text, State: m.State, AnsweredBy: m.AnsweredBy})
	}
	if spec, _ := envelope.Channel(d.Conversation.Channel); spec.Inbound.Window > 0 { // a channel with an answer window
		out.Window = &api.Window{Open: d.WindowOpen, ClosesAt: d.WindowClosesAt}
	}
	return out, nil
}

func (c routerViews) Resolve(ctx context.Context, id string) (store.NewDelivery, error) {
	return c.r.Resolve(ctx, id)
}

func (c routerViews) Transports(agent string) []api.Transport {
	var out []api.Transport
	for _, t := range c.r.Transports(agent) {
		out = append(out, api.Transport{Protocol: t.Protocol, URL: t.URL})
	}
	return out
}

func (c routerViews) OpenAttachment(ctx context.Context, id string, n int, expires, sig string) (string, string, []byte, error) {
	name, mt, data, err := c.r.OpenAttachment(ctx, id, n, expires, sig)
	if errors.Is(err, conversations.ErrBadSignature) {
		return "", "", nil, api.ErrBadSignature
	}
	return name, mt, data, err
}

// conversationKeyIfKnown is the conversation key of configuration c
// when its approvals secret can be read without creating one (approvals.secret,
// or data_dir/approval.key when it exists); nil otherwise.
func conversationKeyIfKnown(c *config.Config, use string) []byte {
	secret := c.Approvals.Secret
	if secret == "" {
		b, err := os.ReadFile(filepath.Join(c.DataDir, "approval.key"))
		if err != nil {
			return nil
		}
		secret = strings.TrimSpace(string(b))
	}
	if secret == "" {
		return nil
	}
	return deriveConversationKey([]byte(secret), use)
}

var _ api.Turns = routerViews{}

func turnItem(t *store.Turn) api.TurnItem {
	return api.TurnItem{ID: t.ID, ConversationID: t.ConversationID, Agent: t.Agent, InboundID: t.InboundID, MessageID: t.MessageID,
		State: t.State, Attempts: t.Attempts, NextAttemptAt: t.NextAttemptAt, LastError: t.LastError, TaskID: t.TaskID,
		AnswerEnvelopeID: t.AnswerEnvelopeID, AnsweredBy: t.AnsweredBy, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

func (c routerViews) ListTurns(ctx context.Context, state string, limit int) ([]api.TurnItem, error) {
	ts, err := c.r.Turns(ctx, state, limit)
	if err != nil {
		return nil, err
	}
	out := make([]api.TurnItem, 0, len(ts))
	for _, t := range ts {
		out = append(out, turnItem(t))
	}
	return out, nil
}

func (c routerViews) RetryTurn(ctx context.Context, id string) (*api.TurnItem, error) {
	t, err := c.r.RetryTurn(ctx, id)
	if err != nil {
		return nil, err
	}
	it := turnItem(t)
	return &it, nil
}
