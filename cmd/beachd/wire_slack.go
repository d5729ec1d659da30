package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/slack"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// Where Slack posts button clicks; public_url + this path is the app's
// Interactivity request URL.
const slackInteractionsPath = "/v1/inbound/slack/interactions"

// Where Slack posts events (direct messages to the app, mentions of it);
// public_url + this path is the app's Event Subscriptions request URL.
const slackEventsPath = "/v1/inbound/slack/events"

const defaultSlackTimeout = 15 * time.Second

// wireSlack builds the Slack deliverer from the `slack:` section. In
// `beachd dev` without one, Slack messages are recorded instead, and
// /dev/slack/messages and /dev/slack/click let a person read them and
// press their buttons as a Slack user.
func (a *app) wireSlack() error {
	c := a.cfg.Slack
	if c == nil && !a.dev {
		return nil
	}
	r := a.renderer
	if r == nil {
		var err error
		if r, err = render.New(render.Config{PublicURL: a.cfg.PublicURL}); err != nil {
			return err
		}
	}
	if c == nil {
		return a.wireSlackRecorder(slack.Renderer(r, a.registry, a.wireMessagePages(r)))
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
	a.slackHealth = client.Health()

	// Button clicks, verified with the signing secret, go to the same
	// approvals service as every other channel's answers; after any
	// decision the Slack messages that asked are rewritten.
	if _, err = a.wireSlackInbound(c.SigningSecret, c.TeamID, client, log); err != nil {
		return err
	}
	// Direct messages and mentions, verified with the same secret, go to
	// the same decider: conversations with the agents whose
	// inbound.slack takes them.
	_, err = a.wireSlackEvents(c.SigningSecret, c.TeamID, client.Self, log)
	return err
}

// wireSlackEvents mounts the Events API endpoint.
func (a *app) wireSlackEvents(secret, team string, self func(context.Context) (slack.Identity, error), log *slog.Logger) (http.Handler, error) {
	h, err := slack.NewEventHandler(slack.EventsConfig{SigningSecret: secret, TeamID: team, Self: self, Now: a.now, Health: a.slackHealth},
		a.db, lateDecider{a}, log)
	if err != nil {
		return nil, err
	}
	a.routes = append(a.routes, api.Route{Method: "POST", Pattern: slackEventsPath, Handler: h, Auth: false})
	if self != nil {
		// auth.test at start: Slack's 3 seconds are not spent on it.
		a.workers = append(a.workers, worker{name: "slack-identity", run: h.Prime})
	}
	return h, nil
}

// wireSlackInbound mounts the interactivity endpoint and the message
// updates that follow every decision.
func (a *app) wireSlackInbound(secret, team string, notes slack.Noter, log *slog.Logger) (http.Handler, error) {
	h, err := slack.NewInteractionHandler(slack.InteractionConfig{SigningSecret: secret, TeamID: team, Now: a.now},
		lateDecider{a}, notes, slack.NewResolver(nil, a.db), log)
	if err != nil {
		return nil, err
	}
	a.routes = append(a.routes, api.Route{Method: "POST", Pattern: slackInteractionsPath, Handler: h, Auth: false})
	up := &slack.Updater{DB: a.db, Enqueue: lateEnqueuer{a}, Now: a.now, Log: log}
	a.onDecided = append(a.onDecided, up.ApprovalDecided)
	a.onMessageShown = append(a.onMessageShown, up.MessageShown)
	return h, nil
}

// wireSlackRecorder sets up the recorded Slack of `beachd dev`: the
// interactivity endpoint checks signatures with a secret of this process,
// with which /dev/slack/click signs the clicks it makes.
func (a *app) wireSlackRecorder(renderFn slack.RenderFunc) error {
	rec := slack.NewRecorder(renderFn, a.now)
	a.slackHealth = &slack.Health{}
	a.deliverers[envelope.ChannelSlack] = rec
	secret := randomToken(32)
	h, err := a.wireSlackInbound(secret, "", rec, a.log.With("component", "slack-dev"))
	if err != nil {
		return err
	}
	// Events of the dev workspace, signed with the same secret: the
	// recorded messages never come back as events.
	ev, err := a.wireSlackEvents(secret, slack.DevTeam, nil, a.log.With("component", "slack-dev"))
	if err != nil {
		return err
	}
	dev := &slack.DevHandler{Log: rec, Interactions: h, Events: ev, Secret: secret, Now: a.now}
	a.slackDev = dev
	open := a.listener != nil && isLoopback(a.listener.Addr())
	a.routes = append(a.routes,
		api.Route{Method: "GET", Pattern: "/dev/slack/messages", Handler: http.HandlerFunc(dev.Messages), Auth: !open},
		// Both act without a key on loopback (a click decides, a message
		// starts a turn): only posts no other web site can have made a
		// browser send.
		api.Route{Method: "POST", Pattern: "/dev/slack/click", Handler: devPostGuard(http.HandlerFunc(dev.Click), open, a.cfg.PublicURL), Auth: !open},
		api.Route{Method: "POST", Pattern: "/dev/slack/message", Handler: devPostGuard(http.HandlerFunc(dev.Message), open, a.cfg.PublicURL), Auth: !open})
	a.banner = append(a.banner,
		fmt.Sprintf("slack         %s/dev/slack/messages   (recorded, not sent; press a button: curl %[1]s/dev/slack/click -d user=U012AB3CD -d channel=D… --data-urlencode value=…)", a.cfg.PublicURL),
		fmt.Sprintf("slack         write to the agent as a Slack user: curl %s/dev/slack/message -d user=U012AB3CD --data-urlencode text=… (-d thread_ts=… to continue a thread)", a.cfg.PublicURL))
	return nil
}

// lateDecider looks the decider up when a click arrives (the
// conversations router may replace the approvals service as a.inbound).
type lateDecider struct{ a *app }

func (d lateDecider) HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error) {
	return d.a.twilioDecider().HandleInbound(ctx, in)
}
