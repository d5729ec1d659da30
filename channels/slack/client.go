package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/slack-go/slack"

	"github.com/cool-ai/beachd/envelope"
)

// ClientConfig configures the Web API client.
type ClientConfig struct {
	// Token is the bot token (xoxb-…), sent as Authorization: Bearer.
	Token string
	// APIBaseURL is the Web API's base, with a trailing slash; empty is
	// Slack's (https://slack.com/api/). Tests point it at Prism or a fake.
	APIBaseURL string
	// Timeout bounds one HTTP call; 0 is 15 s.
	Timeout time.Duration
	// Transport, when set, carries the calls (tests count them).
	Transport http.RoundTripper
}

// Client is the Web API, through slack-go, with no retry of its own: a
// rate-limited or failed call is returned to the dispatcher, which honours
// Retry-After.
type Client struct {
	api    webAPI
	health *Health
}

// Health is what the client learnt of the app from Slack's answers.
func (c *Client) Health() *Health { return c.health }

// note records a call's outcome in the client's Health.
func (c *Client) note(err error) error {
	c.health.call(err, time.Now())
	return err
}

// webAPI is the part of slack-go's client beachd calls.
type webAPI interface {
	PostMessageContext(ctx context.Context, channelID string, options ...slack.MsgOption) (string, string, error)
	UpdateMessageContext(ctx context.Context, channelID, timestamp string, options ...slack.MsgOption) (string, string, string, error)
	PostEphemeralContext(ctx context.Context, channelID, userID string, options ...slack.MsgOption) (string, error)
	GetUserByEmailContext(ctx context.Context, email string) (*slack.User, error)
	AuthTestContext(ctx context.Context) (*slack.AuthTestResponse, error)
}

var _ webAPI = (*slack.Client)(nil)

// NewClient builds the client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Token == "" {
		return nil, errors.New("slack: a bot token is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	rt := cfg.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	health := &Health{}
	hc := &http.Client{Timeout: cfg.Timeout, Transport: bearer{token: cfg.Token, next: rt, health: health}}
	opts := []slack.Option{slack.OptionHTTPClient(hc)}
	if cfg.APIBaseURL != "" {
		u := cfg.APIBaseURL
		if u[len(u)-1] != '/' {
			u += "/"
		}
		opts = append(opts, slack.OptionAPIURL(u))
	}
	return &Client{api: slack.New(cfg.Token, opts...), health: health}, nil
}

// Message is what one post or update sends.
type Message struct {
	Text   string
	Blocks slack.Blocks
	// ThreadTS, when set, posts the message as a reply in that thread.
	ThreadTS string
	// DeliveryID goes in the message's metadata.
	DeliveryID string
}

func (m Message) options() []slack.MsgOption {
	// The text is escaped already (render.SlackEscape): slack-go must not
	// escape it again.
	opts := []slack.MsgOption{slack.MsgOptionText(m.Text, false), slack.MsgOptionBlocks(m.Blocks.BlockSet...),
		slack.MsgOptionDisableLinkUnfurl()}
	if m.ThreadTS != "" {
		opts = append(opts, slack.MsgOptionTS(m.ThreadTS))
	}
	if m.DeliveryID != "" {
		opts = append(opts, slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "beachd_delivery",
			EventPayload: map[string]any{"delivery_id": m.DeliveryID}}))
	}
	return opts
}

// Post sends m to channel (a conversation or user id) and returns the
// conversation it landed in and its ts.
func (c *Client) Post(ctx context.Context, channel string, m Message) (string, string, error) {
	ch, ts, err := c.api.PostMessageContext(ctx, channel, m.options()...)
	if c.note(err) != nil {
		return "", "", fmt.Errorf("chat.postMessage: %w", err)
	}
	return ch, ts, nil
}

// Update rewrites the message ts of channel.
func (c *Client) Update(ctx context.Context, channel, ts string, m Message) error {
	m.DeliveryID, m.ThreadTS = "", ""
	if _, _, _, err := c.api.UpdateMessageContext(ctx, channel, ts, m.options()...); c.note(err) != nil {
		return fmt.Errorf("chat.update: %w", err)
	}
	return nil
}

// Ephemeral shows text to user only, in channel.
func (c *Client) Ephemeral(ctx context.Context, channel, user, text string) error {
	if _, err := c.api.PostEphemeralContext(ctx, channel, user, slack.MsgOptionText(text, false)); c.note(err) != nil {
		return fmt.Errorf("chat.postEphemeral: %w", err)
	}
	return nil
}

// LookupByEmail is the id of the workspace's user with that address.
func (c *Client) LookupByEmail(ctx context.Context, email string) (string, error) {
	u, err := c.api.GetUserByEmailContext(ctx, email)
	if c.note(err) != nil {
		return "", fmt.Errorf("users.lookupByEmail: %w", err)
	}
	if u == nil || u.ID == "" {
		return "", errors.New("users.lookupByEmail: no user id in the answer")
	}
	return u.ID, nil
}

// Self is the app's bot as auth.test names it: its user id, bot id and
// workspace.
func (c *Client) Self(ctx context.Context) (Identity, error) {
	r, err := c.api.AuthTestContext(ctx)
	if c.note(err) != nil {
		err = fmt.Errorf("auth.test: %w", err)
		c.health.noteSelf(Identity{}, "", "", err)
		return Identity{}, err
	}
	if r == nil || !envelope.SlackUser(r.UserID) {
		err := errors.New("auth.test: no bot user id in the answer")
		c.health.noteSelf(Identity{}, "", "", err)
		return Identity{}, err
	}
	id := Identity{UserID: r.UserID, BotID: r.BotID}
	if teamIDPattern.MatchString(r.TeamID) {
		id.TeamID = r.TeamID
	}
	c.health.noteSelf(id, r.Team, r.URL, nil)
	return id, nil
}

// bearer sends the token as Authorization: Bearer on every call, as Slack
// recommends (slack-go puts it there on GETs only, and in the form of a
// POST, which Slack also reads).
type bearer struct {
	token  string
	next   http.RoundTripper
	health *Health
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.next.RoundTrip(r)
	if err == nil {
		// Slack names the token's scopes on every Web API answer.
		b.health.noteScopes(resp.Header, time.Now())
	}
	return resp, err
}
