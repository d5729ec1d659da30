package slack

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// Scope is a bot token scope beachd needs, and what for.
type Scope struct{ Name, Why string }

// Scopes are the bot token scopes beachd uses: posting and rewriting,
// direct messages, email lookups, and for conversations the events' reads.
var Scopes = []Scope{
	{"chat:write", "post messages and rewrite them after a decision"},
	{"im:write", "open the direct message with a user"},
	{"users:read", "look users up"},
	{"users:read.email", "resolve a recipient given by email address"},
	{"im:history", "read direct messages to the app (conversations, message.im)"},
	{"app_mentions:read", "read mentions of the app in channels (conversations, app_mention)"},
	{"channels:history", "read replies in a channel thread that is a conversation (message.channels)"},
}

// Events are the bot events beachd takes, and what for.
var Events = []Scope{
	{"message.im", "direct messages to the app start and continue conversations"},
	{"app_mention", "mentions of the app in a channel start and continue conversations"},
	{"message.channels", "replies without a mention in a channel thread that is already a conversation continue it"},
}

// tokenCodes are the Web API errors that say the bot token itself is
// wrong: every later call will fail alike until an operator acts.
var tokenCodes = []string{"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type", "team_access_not_granted"}

// Health is what beachd last learnt of the Slack app: its bot and
// workspace (auth.test), the scopes Slack names on its answers
// (X-OAuth-Scopes), the last token error of any call (cleared by a call
// that succeeds), and the events received. Safe for concurrent use.
type Health struct {
	mu        sync.Mutex
	self      Identity
	team, url string
	selfErr   string
	scopes    []string
	scopesAt  time.Time
	problem   string
	problemAt time.Time
	events    int
	lastEvent time.Time
}

// HealthStatus is a copy of what Health knows.
type HealthStatus struct {
	Self Identity
	// Team and URL are the workspace's name and address.
	Team, URL string
	// SelfError is why auth.test last failed, if it did.
	SelfError string
	// Scopes are the token's scopes as Slack last named them; nil when no
	// answer named them yet.
	Scopes   []string
	ScopesAt time.Time
	// Problem is the last token error ("token_revoked: …") and when it was
	// seen; empty once a call succeeds.
	Problem   string
	ProblemAt time.Time
	// Events counts the signed events received since start.
	Events    int
	LastEvent time.Time
}

// Status returns what h knows.
func (h *Health) Status() HealthStatus {
	if h == nil {
		return HealthStatus{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return HealthStatus{Self: h.self, Team: h.team, URL: h.url, SelfError: h.selfErr, Scopes: slices.Clone(h.scopes), ScopesAt: h.scopesAt,
		Problem: h.problem, ProblemAt: h.problemAt, Events: h.events, LastEvent: h.lastEvent}
}

// Missing are the scopes of want not among the token's; nil when the
// token's scopes are not known yet.
func (s HealthStatus) Missing(want []Scope) []Scope {
	if s.Scopes == nil {
		return nil
	}
	var out []Scope
	for _, w := range want {
		if !slices.Contains(s.Scopes, w.Name) {
			out = append(out, w)
		}
	}
	return out
}

// call notes the outcome of a Web API call at now.
func (h *Health) call(err error, now time.Time) {
	if h == nil {
		return
	}
	var se slack.SlackErrorResponse
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.problem, h.problemAt = "", time.Time{}
	case errors.As(err, &se) && slices.Contains(tokenCodes, se.Err):
		why := permanentCodes[se.Err]
		if why == "" {
			why = "the bot token is not accepted"
		}
		if h.problem == "" {
			h.problemAt = now
		}
		h.problem = se.Err + ": " + why
	}
}

// noteSelf keeps auth.test's answer.
func (h *Health) noteSelf(id Identity, team, url string, err error) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.selfErr = err.Error()
		return
	}
	h.self, h.team, h.url, h.selfErr = id, clipRunes(team, 200), clipRunes(url, 300), ""
}

// noteScopes keeps the scopes an answer's X-OAuth-Scopes names.
func (h *Health) noteScopes(hdr http.Header, now time.Time) {
	v := hdr.Get("X-OAuth-Scopes")
	if h == nil || v == "" || len(v) > 4096 {
		return
	}
	var scopes []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" && len(scopes) < 200 {
			scopes = append(scopes, s)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scopes, h.scopesAt = scopes, now
}

// Event notes a signed event received at now.
func (h *Health) Event(now time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events++
	h.lastEvent = now
}
