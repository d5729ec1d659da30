package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fake is a Slack Web API that keeps what beachd posted, updated and
// showed, for end-to-end tests that must see a message change (Prism
// answers every request with the same example). It answers
// chat.postMessage, chat.update, chat.postEphemeral and
// users.lookupByEmail as Slack does (form or JSON bodies, {"ok":…}); its
// users are Users (email → id); auth.test names BotUser in Team.
type Fake struct {
	URL   string
	Users map[string]string
	// BotUser, BotID and Team are what auth.test answers: the app's bot
	// and its workspace.
	BotUser, BotID, Team string

	// Scopes is the X-OAuth-Scopes header of every answer (Slack names the
	// token's scopes there); empty: none.
	Scopes string

	mu         sync.Mutex
	n          int
	Posts      []Call
	Updates    []Call
	Ephemerals []Call
	faults     Faults
	attempts   []Attempt
}

// Faults are what the fake refuses, as Slack would (set with SetFaults).
type Faults struct {
	// Refuse answers chat.postMessage to these channels with their error
	// (not_in_channel, channel_not_found, is_archived).
	Refuse map[string]string
	// Token, when set, answers every call with this error (invalid_auth,
	// token_revoked, token_expired): the token is refused.
	Token string
	// RateLimited is how many chat.postMessage calls, from now, are
	// answered 429 with Retry-After: RetryAfter seconds (1 when 0).
	RateLimited, RetryAfter int
}

// Attempt is one chat.postMessage the fake answered: to where, when, and
// what it answered ("ok", "ratelimited" or the error).
type Attempt struct {
	Channel, Text, Answer string
	At                    time.Time
}

// SetFaults replaces the fake's faults.
func (f *Fake) SetFaults(x Faults) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = x
}

// Attempts returns every chat.postMessage the fake answered.
func (f *Fake) Attempts() []Attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Attempt(nil), f.attempts...)
}

// Call is one request: its form (or JSON) fields.
type Call struct {
	Channel, TS, User, Text, Blocks, ThreadTS string
}

// StartFake serves the fake until the test ends.
func StartFake(t testing.TB) *Fake {
	f := &Fake{Users: map[string]string{}, BotUser: "U0BEACHD1", BotID: "B0BEACHD1", Team: "T0BEACHD1"}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.URL = srv.URL + "/"
	return f
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer xoxb-") {
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	r.ParseForm()
	c := Call{Channel: r.Form.Get("channel"), TS: r.Form.Get("ts"), User: r.Form.Get("user"),
		Text: r.Form.Get("text"), Blocks: r.Form.Get("blocks"), ThreadTS: r.Form.Get("thread_ts")}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.Scopes != "" {
		w.Header().Set("X-OAuth-Scopes", f.Scopes)
	}
	method := strings.TrimPrefix(r.URL.Path, "/")
	refuse := func(answer string) {
		if method == "chat.postMessage" {
			f.attempts = append(f.attempts, Attempt{Channel: c.Channel, Text: c.Text, Answer: answer, At: time.Now()})
		}
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": answer})
	}
	if f.faults.Token != "" {
		refuse(f.faults.Token)
		return
	}
	if method == "chat.postMessage" && f.faults.RateLimited > 0 {
		f.faults.RateLimited--
		after := f.faults.RetryAfter
		if after <= 0 {
			after = 1
		}
		w.Header().Set("Retry-After", fmt.Sprint(after))
		w.WriteHeader(http.StatusTooManyRequests)
		refuse("ratelimited")
		return
	}
	if why, ok := f.faults.Refuse[c.Channel]; ok && method == "chat.postMessage" {
		refuse(why)
		return
	}
	switch method {
	case "chat.postMessage":
		f.attempts = append(f.attempts, Attempt{Channel: c.Channel, Text: c.Text, Answer: "ok", At: time.Now()})
		f.n++
		c.TS = fmt.Sprintf("1767225600.%06d", f.n)
		ch := c.Channel
		if strings.HasPrefix(ch, "U") {
			ch = "D" + ch[1:] // Slack answers with the direct message's id
		}
		c.Channel = ch
		f.Posts = append(f.Posts, c)
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": ch, "ts": c.TS})
	case "chat.update":
		for _, p := range f.Posts {
			if p.Channel == c.Channel && p.TS == c.TS {
				f.Updates = append(f.Updates, c)
				json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.Channel, "ts": c.TS})
				return
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "message_not_found"})
	case "chat.postEphemeral":
		f.Ephemerals = append(f.Ephemerals, c)
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "message_ts": "1767225600.999999"})
	case "auth.test":
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": "https://beachd-test.slack.com/", "team": "beachd",
			"user": "beachd", "team_id": f.Team, "user_id": f.BotUser, "bot_id": f.BotID})
	case "users.lookupByEmail":
		id, ok := f.Users[strings.ToLower(r.Form.Get("email"))]
		if !ok {
			json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "users_not_found"})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "user": map[string]any{"id": id}})
	default:
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// Snapshot returns copies of what was posted, updated and shown.
func (f *Fake) Snapshot() (posts, updates, ephemerals []Call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.Posts...), append([]Call(nil), f.Updates...), append([]Call(nil), f.Ephemerals...)
}
