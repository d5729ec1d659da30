package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
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

	mu         sync.Mutex
	n          int
	Posts      []Call
	Updates    []Call
	Ephemerals []Call
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
	switch strings.TrimPrefix(r.URL.Path, "/") {
	case "chat.postMessage":
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
