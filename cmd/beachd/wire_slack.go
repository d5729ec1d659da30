package main

import (
	"time"

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
	return nil
}
