package console

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cool-ai/beachd/channels/slack"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Slack is what the console shows of the Slack channel.
type Slack interface {
	SlackStatus(ctx context.Context) SlackStatus
}

// SlackStatus is the Slack channel as this beachd runs it.
type SlackStatus struct {
	// Configured: a slack: section (false: `beachd dev` records the
	// messages instead).
	Configured bool
	// InteractionsURL and EventsURL are the request URLs the app's
	// Interactivity and Event Subscriptions must name.
	InteractionsURL, EventsURL string
	// TeamID is slack.team_id when set.
	TeamID string
	// Conversations lists the agents taking Slack messages, with their
	// inbound.slack entries ("travel: im, C0123ABCD"); none: the events are
	// not needed.
	Conversations []string
	Health        slack.HealthStatus
}

// slackScope is a scope as the Slack page shows it.
type slackScope struct {
	slack.Scope
	// State is "granted", "missing" or "unknown" (no answer named the
	// token's scopes yet); Needed is false for the scopes of conversations
	// when no agent takes Slack messages.
	State  string
	Needed bool
}

type slackData struct {
	SlackStatus
	Scopes  []slackScope
	Missing []string
	Events  []slack.Scope
	// EventsHint says what to check when no event has arrived and agents
	// take Slack messages.
	EventsHint bool
	Recent     []deliveryRow
	Dead       int
	Dev        bool
}

// conversationScopes are the scopes only conversations need.
var conversationScopes = []string{"im:history", "app_mentions:read", "channels:history"}

func (c *Console) slackPage(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Slack == nil {
		c.fail(w, r, id, http.StatusNotFound, "Slack is not configured on this beachd.")
		return
	}
	st := c.deps.Slack.SlackStatus(r.Context())
	d := slackData{SlackStatus: st, Events: slack.Events, Dev: c.deps.Dev != nil}
	convs := len(st.Conversations) > 0
	for _, s := range slack.Scopes {
		sc := slackScope{Scope: s, State: "unknown", Needed: convs || !slices.Contains(conversationScopes, s.Name)}
		if st.Health.Scopes != nil {
			sc.State = "missing"
			if slices.Contains(st.Health.Scopes, s.Name) {
				sc.State = "granted"
			} else if sc.Needed {
				d.Missing = append(d.Missing, s.Name)
			}
		}
		d.Scopes = append(d.Scopes, sc)
	}
	d.EventsHint = st.Configured && convs && st.Health.Events == 0
	ds, _, err := c.deps.DB.QueryDeliveries(r.Context(), store.DeliveryFilter{Channel: envelope.ChannelSlack}, 25)
	if err != nil {
		c.fail(w, r, id, http.StatusInternalServerError, "The Slack deliveries could not be read: "+err.Error())
		return
	}
	gists := map[string]gist{}
	for _, dl := range ds {
		g, ok := gists[dl.EnvelopeID]
		if !ok {
			g = gist{Kind: "message"}
			if rec, err := c.deps.DB.Envelope(r.Context(), dl.EnvelopeID); err == nil {
				g = gistOf(rec.Envelope)
			}
			gists[dl.EnvelopeID] = g
		}
		row := deliveryRow{Delivery: dl, Gist: g}
		if slackKind(dl.Extra) == "rewrite" {
			row.Gist.Kind = "rewrite after a decision"
		} else if dl.Extra[envelope.ExtraConversation] != "" && g.Kind == "message" {
			row.Gist.Kind = "conversation answer"
		}
		if dl.State == store.StateDead {
			d.Dead++
		}
		d.Recent = append(d.Recent, row)
	}
	c.render(w, http.StatusOK, "slack", c.newPage(r, id, "slack", "Slack", d))
}

// slackKind says what a Slack delivery does: post a message or rewrite one.
func slackKind(extra map[string]string) string {
	if strings.TrimSpace(extra[slack.ExtraUpdate]) != "" {
		return "rewrite"
	}
	return "post"
}

// DevSlack is the recorded Slack of `beachd dev`, when the dev inbox has
// one: its messages, writing to the app as a Slack user, and pressing a
// recorded message's button as one.
type DevSlack interface {
	SlackMessages() []DevSlackMessage
	// SlackWrite writes text as user, in channel (empty: a direct message)
	// and thread threadTS (empty: a new one); it returns the thread.
	SlackWrite(ctx context.Context, user, channel, threadTS, text string) (string, error)
	SlackClick(ctx context.Context, user, channel, action, value string) error
}

// DevSlackMessage is one recorded Slack message.
type DevSlackMessage struct {
	DeliveryID, Channel, TS, ThreadTS, To, Text string
	// Ephemeral: a note only User saw.
	Ephemeral bool
	User      string
	Buttons   []DevSlackButton
	At        time.Time
	UpdatedAt time.Time
	// PressAs is who the inbox presses its buttons as by default: the
	// user it went to.
	PressAs string
}

// DevSlackButton is an Approve or Deny button of a recorded message.
type DevSlackButton struct{ Label, ActionID, Value string }

// devSlackShown bounds the recorded Slack messages the inbox shows.
const devSlackShown = 30

func (c *Console) devSlackWrite(w http.ResponseWriter, r *http.Request, id identity) {
	ds, ok := c.deps.Dev.(DevSlack)
	if !ok {
		c.fail(w, r, id, http.StatusNotFound, "Slack is not recorded here.")
		return
	}
	f := r.PostForm
	user, ch, thread, text := strings.TrimSpace(f.Get("user")), strings.TrimSpace(f.Get("channel")), strings.TrimSpace(f.Get("thread_ts")), strings.TrimSpace(f.Get("text"))
	if !envelope.SlackUser(user) || text == "" || len(text) > 4000 || len(ch) > 32 || len(thread) > 32 {
		c.fail(w, r, id, http.StatusBadRequest, "A Slack message needs a user id (U…) and a text of at most 4,000 characters.")
		return
	}
	if _, err := ds.SlackWrite(r.Context(), user, ch, thread, text); err != nil {
		c.fail(w, r, id, http.StatusBadRequest, "The Slack message was not accepted: "+err.Error())
		return
	}
	done(w, r, "/ui/dev", "slack-written")
}

func (c *Console) devSlackClick(w http.ResponseWriter, r *http.Request, id identity) {
	ds, ok := c.deps.Dev.(DevSlack)
	if !ok {
		c.fail(w, r, id, http.StatusNotFound, "Slack is not recorded here.")
		return
	}
	f := r.PostForm
	user, ch, pick := strings.TrimSpace(f.Get("user")), f.Get("channel"), f.Get("pick")
	if pick != "approve" && pick != "deny" {
		c.fail(w, r, id, http.StatusBadRequest, "Press Approve or Deny.")
		return
	}
	value := f.Get(pick)
	if !envelope.SlackUser(user) || value == "" || len(value) > 2000 || len(ch) > 32 {
		c.fail(w, r, id, http.StatusBadRequest, "A click needs the Slack user id (U…) who presses the button.")
		return
	}
	if err := ds.SlackClick(r.Context(), user, ch, "beachd_"+pick, value); err != nil {
		c.fail(w, r, id, http.StatusBadRequest, "The click was not accepted: "+err.Error())
		return
	}
	done(w, r, "/ui/dev", "slack-clicked")
}
