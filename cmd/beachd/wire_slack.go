package main

import (
	"context"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/slack"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// Where Slack posts events and button clicks; public_url + these paths are
// what the app's settings name.
const (
	slackEventsPath       = "/v1/inbound/slack/events"
	slackInteractionsPath = "/v1/inbound/slack/interactions"
)

const defaultSlackTimeout = 15 * time.Second

// wireSlack builds the Slack deliverer from the `slack:` section.
func (a *app) wireSlack() error {
	c := a.cfg.Slack
	if c == nil {
		return nil
	}
	r := a.renderer
	if r == nil {
		var err error
		if r, err = render.New(render.Config{PublicURL: a.cfg.PublicURL}); err != nil {
			return err
		}
	}
	timeout := durationOr(c.Timeout, defaultSlackTimeout)
	client, err := slack.NewClient(slack.ClientConfig{Token: c.BotToken, APIBaseURL: c.APIURL(), Timeout: timeout})
	if err != nil {
		return err
	}
	log := a.log.With("component", "slack")
	sender, err := slack.NewSender(slack.Config{Now: a.now}, client, a.db, slack.Renderer(r, a.registry, a.wireMessagePages(r)), log)
	if err != nil {
		return err
	}
	policy, err := channels.DefaultPolicy(envelope.ChannelSlack)
	if err != nil {
		return err
	}
	policy.Lifetime = durationOr(c.Lifetime, policy.Lifetime)
	// An attempt may look an address up and post: room for two calls.
	policy.Timeout = max(policy.Timeout, 2*timeout+5*time.Second)
	a.deliverers[envelope.ChannelSlack] = sender
	a.policies[envelope.ChannelSlack] = policy
	a.slackClient = client

	// Button clicks, verified with the signing secret, go to the same
	// approvals service as every other channel's answers; after any
	// decision the Slack messages that asked are rewritten.
	h, err := slack.NewInteractionHandler(slack.InteractionConfig{SigningSecret: c.SigningSecret, Now: a.now},
		lateDecider{a}, client, slack.NewResolver(nil, a.db), log)
	if err != nil {
		return err
	}
	a.routes = append(a.routes, api.Route{Method: "POST", Pattern: slackInteractionsPath, Handler: h, Auth: false})
	up := &slack.Updater{DB: a.db, Enqueue: lateEnqueuer{a}, Now: a.now, Log: log}
	a.onDecided = append(a.onDecided, up.ApprovalDecided)
	return nil
}

// lateDecider looks the decider up when a click arrives (the
// conversations router may replace the approvals service as a.inbound).
type lateDecider struct{ a *app }

func (d lateDecider) HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error) {
	return d.a.twilioDecider().HandleInbound(ctx, in)
}
