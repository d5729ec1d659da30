package config

import (
	"net/url"
	"regexp"
	"time"
)

// SlackConfig is the `slack:` section: the Slack channel, through one app's
// bot token.
//
//	slack:
//	  bot_token: "${SLACK_BOT_TOKEN}"            # xoxb-…
//	  signing_secret: "${SLACK_SIGNING_SECRET}"  # verifies Slack's requests (events, button clicks)
//	  api_base_url: https://slack.com/api/      # default; a test double
//	  team_id: T0123ABCD                        # only this workspace's clicks count
//	  timeout: 15s                              # one HTTP call, default 15s
//	  lifetime: 6h                              # retries give up after, default 6h
//
// Slack posts button clicks to public_url + /v1/inbound/slack/interactions
// (the app's Interactivity request URL: docs/slack.md).
type SlackConfig struct {
	BotToken      string `yaml:"bot_token"`
	SigningSecret string `yaml:"signing_secret"`
	APIBaseURL    string `yaml:"api_base_url"`
	// TeamID, when set, is the workspace (T…) whose clicks count: a
	// click from another is refused with a note.
	TeamID   string        `yaml:"team_id"`
	Timeout  time.Duration `yaml:"timeout"`
	Lifetime time.Duration `yaml:"lifetime"`
}

// DefaultSlackAPIBaseURL is Slack's Web API.
const DefaultSlackAPIBaseURL = "https://slack.com/api/"

var (
	slackBotToken      = regexp.MustCompile(`^xoxb-[A-Za-z0-9-]{10,250}$`)
	slackSigningSecret = regexp.MustCompile(`^[0-9a-f]{32}$`)
	slackTeamID        = regexp.MustCompile(`^[TE][A-Z0-9]{2,20}$`)
)

// APIURL is the Web API's base URL, with the trailing slash slack-go wants.
func (c *SlackConfig) APIURL() string {
	u := c.APIBaseURL
	if u == "" {
		return DefaultSlackAPIBaseURL
	}
	if u[len(u)-1] != '/' {
		u += "/"
	}
	return u
}

func (c *SlackConfig) validate(v *validator) {
	switch {
	case c.BotToken == "":
		v.errorf("slack.bot_token", "required: the app's bot token (xoxb-…), from its OAuth & Permissions page")
	case !slackBotToken.MatchString(c.BotToken):
		v.errorf("slack.bot_token", "must be a bot token, xoxb- followed by letters, digits and dashes (a user token xoxp- or an app token xapp- will not do)")
	}
	switch {
	case c.SigningSecret == "":
		v.errorf("slack.signing_secret", "required: the app's signing secret (Basic Information), which verifies Slack's requests")
	case !slackSigningSecret.MatchString(c.SigningSecret):
		v.errorf("slack.signing_secret", "must be the 32 hex digits of the app's signing secret")
	}
	if c.APIBaseURL != "" {
		u, err := url.Parse(c.APIBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			v.errorf("slack.api_base_url", "must be an absolute http(s) URL without a query, such as https://slack.com/api/")
		}
	}
	if c.TeamID != "" && !slackTeamID.MatchString(c.TeamID) {
		v.errorf("slack.team_id", "must be a workspace id such as T0123ABCD, got %q", c.TeamID)
	}
	if c.Timeout < 0 || c.Timeout > 2*time.Minute {
		v.errorf("slack.timeout", "must be between 0 (default 15s) and 2m")
	}
	if c.Lifetime < 0 {
		v.errorf("slack.lifetime", "must not be negative")
	}
}
