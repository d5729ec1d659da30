package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// messageEvent is an event_callback of team T0TEAM001 carrying event.
func messageEvent(eventID, event string) string {
	return fmt.Sprintf(`{"token":"x","team_id":"T0TEAM001","api_app_id":"A0APP0001","type":"event_callback","event_id":%q,"event_time":1767225600,"event":%s}`, eventID, event)
}

const dmEvent = `{"type":"message","channel":"D0ANN0001","channel_type":"im","user":"U0ANN0001","text":"Book me a table &amp; a taxi","ts":"1767225600.000100","event_ts":"1767225600.000100"}`

type eventsFixture struct {
	h    *EventHandler
	dec  *recordingDecider
	self int
}

func newEvents(t *testing.T, team string) *eventsFixture {
	t.Helper()
	f := &eventsFixture{dec: &recordingDecider{res: envelope.InboundResult{Outcome: "turn"}}}
	h, err := NewEventHandler(EventsConfig{SigningSecret: testSecret, TeamID: team, Now: testNow,
		Self: func(context.Context) (Identity, error) {
			f.self++
			return Identity{UserID: "U0BOT0001", BotID: "B0BOT0001", TeamID: "T0TEAM001"}, nil
		}}, openStore(t), f.dec, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

func (f *eventsFixture) post(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func (f *eventsFixture) inbound() []envelope.Inbound {
	f.dec.mu.Lock()
	defer f.dec.mu.Unlock()
	return append([]envelope.Inbound(nil), f.dec.got...)
}

// Nothing of a request whose signature is missing, wrong or stale is read:
// 401 with the reason.
func TestEventsSignature(t *testing.T) {
	f := newEvents(t, "")
	body := messageEvent("Ev0000001", dmEvent)
	missing := httptest.NewRequest("POST", "/v1/inbound/slack/events", strings.NewReader(body))
	stale := signed(body, testNow().Add(-6*time.Minute), testSecret)
	wrong := signed(body, testNow(), "00000000000000000000000000000000")
	tampered := signed(body, testNow(), testSecret)
	tampered.Body = http.NoBody
	for name, tc := range map[string]struct {
		r    *http.Request
		want string
	}{
		"missing":  {missing, "no X-Slack-Signature"},
		"stale":    {stale, "more than five minutes"},
		"wrong":    {wrong, "signature does not match"},
		"tampered": {tampered, "signature does not match"},
	} {
		w := f.post(tc.r)
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: %d %q, want 401 naming %q", name, w.Code, w.Body.String(), tc.want)
		}
	}
	if got := f.inbound(); len(got) != 0 {
		t.Fatalf("an unsigned request reached the decider: %+v", got)
	}
}

// url_verification is answered with its challenge, once signed.
func TestEventsChallenge(t *testing.T) {
	f := newEvents(t, "")
	body := `{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	w := f.post(signed(body, testNow(), testSecret))
	var got struct{ Challenge string }
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" ||
		w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("challenge: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	if w := f.post(signed(`{"type":"url_verification","challenge":"<script>"}`, testNow(), testSecret)); w.Code != http.StatusBadRequest {
		t.Fatalf("odd challenge: %d", w.Code)
	}
}

// A direct message reaches the decider as the user's message in its
// thread; a mention too, without the app's mention; Slack's retry of the
// same event reaches nothing more.
func TestEventsMessageAndRetry(t *testing.T) {
	f := newEvents(t, "")
	body := messageEvent("Ev0000001", dmEvent)
	if w := f.post(signed(body, testNow(), testSecret)); w.Code != http.StatusOK {
		t.Fatalf("message: %d %s", w.Code, w.Body.String())
	}
	retry := signed(body, testNow().Add(time.Minute), testSecret)
	retry.Header.Set("X-Slack-Retry-Num", "1")
	retry.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	if w := f.post(retry); w.Code != http.StatusOK {
		t.Fatalf("retry: %d %s", w.Code, w.Body.String())
	}
	mention := messageEvent("Ev0000002", `{"type":"app_mention","channel":"C0DESK001","user":"U0BOB0001","text":"<@U0BOT0001> is <@U0ANN0001> in?","ts":"1767225700.000200","thread_ts":"1767225650.000150"}`)
	if w := f.post(signed(mention, testNow(), testSecret)); w.Code != http.StatusOK {
		t.Fatalf("mention: %d %s", w.Code, w.Body.String())
	}
	got := f.inbound()
	if len(got) != 2 {
		t.Fatalf("%d messages reached the decider, want 2 (the retry none): %+v", len(got), got)
	}
	dm := got[0]
	if dm.Channel != envelope.ChannelSlack || dm.From != "U0ANN0001" || dm.To != "D0ANN0001/1767225600.000100" ||
		len(dm.Recipients) != 1 || dm.Recipients[0] != SlackIM || dm.MessageID != "slack:D0ANN0001:1767225600.000100" ||
		dm.Text != "Book me a table & a taxi" || dm.Evidence["slackSignature"] != "valid" {
		t.Errorf("direct message %+v", dm)
	}
	m := got[1]
	if m.From != "U0BOB0001" || m.To != "C0DESK001/1767225650.000150" || m.Recipients[0] != "C0DESK001" || m.Text != "is <@U0ANN0001> in?" {
		t.Errorf("mention %+v", m)
	}
	if f.self != 1 {
		t.Errorf("auth.test asked %d times, want once", f.self)
	}
}

// A failure of the decider is a 500 (Slack retries) and the retry is
// handled.
func TestEventsRetryAfterFailure(t *testing.T) {
	f := newEvents(t, "")
	fail := &failingDecider{err: errors.New("store down")}
	f.h.decider = fail
	body := messageEvent("Ev0000003", dmEvent)
	if w := f.post(signed(body, testNow(), testSecret)); w.Code != http.StatusInternalServerError {
		t.Fatalf("failure: %d", w.Code)
	}
	f.h.decider = f.dec
	if w := f.post(signed(body, testNow(), testSecret)); w.Code != http.StatusOK || len(f.inbound()) != 1 {
		t.Fatalf("retry after failure: %d, %d messages", w.Code, len(f.inbound()))
	}
}

type failingDecider struct{ err error }

func (d *failingDecider) HandleInbound(context.Context, envelope.Inbound) (envelope.InboundResult, error) {
	return envelope.InboundResult{}, d.err
}

// Bots' messages (the app's own included), edits, deletions, channel
// messages and other event types are acknowledged and reach nothing.
func TestEventsIgnored(t *testing.T) {
	f := newEvents(t, "")
	for i, ev := range []string{
		`{"type":"message","subtype":"bot_message","channel":"D0ANN0001","channel_type":"im","bot_id":"B0OTHER01","text":"hi","ts":"1767225600.000100"}`,
		`{"type":"message","channel":"D0ANN0001","channel_type":"im","user":"U0BOT0001","bot_id":"B0BOT0001","text":"our answer","ts":"1767225600.000200","thread_ts":"1767225600.000100"}`,
		`{"type":"message","channel":"D0ANN0001","channel_type":"im","user":"U0BOT0001","text":"ours, no bot_id","ts":"1767225600.000300"}`,
		`{"type":"message","subtype":"message_changed","channel":"D0ANN0001","channel_type":"im","message":{"user":"U0ANN0001","text":"edited"},"ts":"1767225600.000400"}`,
		`{"type":"message","subtype":"message_deleted","channel":"D0ANN0001","channel_type":"im","deleted_ts":"1767225600.000100","ts":"1767225600.000500"}`,
		`{"type":"message","channel":"C0DESK001","channel_type":"channel","user":"U0ANN0001","text":"chatter","ts":"1767225600.000600"}`,
		`{"type":"message","subtype":"channel_join","channel":"D0ANN0001","channel_type":"im","user":"U0ANN0001","text":"joined","ts":"1767225600.000700"}`,
		`{"type":"reaction_added","user":"U0ANN0001","reaction":"thumbsup","item":{"type":"message","channel":"C0DESK001","ts":"1.2"}}`,
		`{"type":"app_mention","channel":"C0DESK001","user":"U0ANN0001","text":"<@U0BOT0001> fixed","ts":"1767225600.000800","edited":{"user":"U0ANN0001","ts":"1767225601.000000"}}`,
	} {
		w := f.post(signed(messageEvent(fmt.Sprintf("Ev10%05d", i), ev), testNow(), testSecret))
		if w.Code != http.StatusOK {
			t.Errorf("event %d: %d %s", i, w.Code, w.Body.String())
		}
	}
	if got := f.inbound(); len(got) != 0 {
		t.Fatalf("ignored events reached the decider: %+v", got)
	}
}

// An event of another workspace is refused: the configured one, or the
// one auth.test names.
func TestEventsOtherTeamRefused(t *testing.T) {
	other := strings.Replace(messageEvent("Ev0000004", dmEvent), "T0TEAM001", "T0EVIL001", 1)
	for _, team := range []string{"T0TEAM001", ""} {
		f := newEvents(t, team)
		w := f.post(signed(other, testNow(), testSecret))
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "workspace T0EVIL001") {
			t.Errorf("team %q: %d %q", team, w.Code, w.Body.String())
		}
		if len(f.inbound()) != 0 {
			t.Errorf("team %q: another workspace's message reached the decider", team)
		}
	}
}

// A body over the bound is refused before anything else; a signed body
// that is not Slack's shape is a 400 naming what is wrong.
func TestEventsBounds(t *testing.T) {
	f := newEvents(t, "")
	f.h.cfg.MaxBody = 4 << 10
	big := messageEvent("Ev0000005", strings.Replace(dmEvent, "Book me", strings.Repeat("x", 5<<10), 1))
	if w := f.post(signed(big, testNow(), testSecret)); w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "body over 4096 bytes") {
		t.Fatalf("large body: %d %q", w.Code, w.Body.String())
	}
	for body, want := range map[string]string{
		`[1]`:                         "not a JSON object",
		messageEvent("nope", dmEvent): "event_id",
		strings.Replace(messageEvent("Ev0000006", dmEvent), `"user":"U0ANN0001"`, `"user":"alice"`, 1):      "not a Slack user id",
		strings.Replace(messageEvent("Ev0000007", dmEvent), `"channel":"D0ANN0001"`, `"channel":"../x"`, 1): "not a Slack conversation id",
		strings.Replace(messageEvent("Ev0000008", dmEvent), `"ts":"1767225600.000100"`, `"ts":"soon"`, 1):   "not a Slack timestamp",
	} {
		w := f.post(signed(body, testNow(), testSecret))
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), want) {
			t.Errorf("%.60s: %d %q, want 400 naming %q", body, w.Code, w.Body.String(), want)
		}
	}
	if len(f.inbound()) != 0 {
		t.Fatal("a refused request reached the decider")
	}
	if w := f.post(httptest.NewRequest("GET", "/v1/inbound/slack/events", nil)); w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", w.Code)
	}
}

// FuzzSlackEvent: the decoder never panics, and what it accepts is within
// its bounds, as is the inbound message made of it.
func FuzzSlackEvent(f *testing.F) {
	f.Add([]byte(messageEvent("Ev0000001", dmEvent)))
	f.Add([]byte(`{"type":"url_verification","challenge":"abc"}`))
	f.Add([]byte(messageEvent("Ev0000002", `{"type":"app_mention","channel":"C0DESK001","user":"U0BOB0001","text":"<@U0BOT0001|bot> hi","ts":"1.2","thread_ts":"1.1"}`)))
	f.Add([]byte(messageEvent("Ev0000003", `{"type":"message","subtype":"message_changed","channel":{"id":"C1"},"ts":"1.2"}`)))
	f.Add([]byte(messageEvent("Ev0000004", `{"type":"message","user":{"id":"U1"},"channel":"D0ANN0001","ts":"1.2"}`)))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := ParseEvent(body)
		if err != nil {
			if ev != nil {
				t.Fatal("an event and an error")
			}
			return
		}
		if ev.Type == "" || len(ev.Type) > maxEventType || len(ev.Challenge) > maxChallenge {
			t.Fatalf("out of bounds: %+v", ev)
		}
		if ev.Type != "event_callback" {
			return
		}
		if !eventIDPattern.MatchString(ev.EventID) || !teamIDPattern.MatchString(ev.TeamID) || ev.Message == nil {
			t.Fatalf("event_callback accepted: %+v", ev)
		}
		for _, self := range []Identity{{}, {UserID: "U0BOT0001"}} {
			in, why := inboundOfEvent(ev, self, testNow())
			if why != "" {
				continue
			}
			ch, ts, _ := strings.Cut(in.To, "/")
			if !envelope.SlackUser(in.From) || !envelope.SlackConversation(ch) || !tsPattern.MatchString(ts) ||
				len(in.Recipients) != 1 || len(in.FullText) > maxEventText || strings.ContainsAny(in.MessageID, "\r\n/") {
				t.Fatalf("inbound %+v of %+v", in, ev.Message)
			}
		}
	})
}

// threadStore is the store with one conversation held in a channel thread.
type threadStore struct {
	EventStore
	key          string
	participants []string
}

func (s threadStore) ConversationByThread(_ context.Context, key string) (*store.Conversation, error) {
	if key != s.key {
		return nil, store.ErrNotFound
	}
	return &store.Conversation{ID: "cnv_1", Participants: s.participants}, nil
}

// A reply without a mention in a channel thread (message.channels) is taken
// only when the thread is a conversation beachd holds and its writer is one
// of the conversation's participants: it goes on with no Recipients (it
// continues that thread's conversation, it starts none). Other threads,
// other people, top-level channel messages and replies that mention the
// app (their app_mention event takes them) are ignored.
func TestEventsThreadReply(t *testing.T) {
	dec := &recordingDecider{res: envelope.InboundResult{Outcome: "turn"}}
	st := threadStore{EventStore: openStore(t), key: store.ThreadKey(envelope.ChannelSlack, "C0DESK001", "1767225600.000100"),
		participants: []string{"U0ANN0001"}}
	h, err := NewEventHandler(EventsConfig{SigningSecret: testSecret, Now: testNow,
		Self: func(context.Context) (Identity, error) {
			return Identity{UserID: "U0BOT0001", BotID: "B0BOT0001", TeamID: "T0TEAM001"}, nil
		}}, st, dec, nil)
	if err != nil {
		t.Fatal(err)
	}
	reply := func(user, channel, thread, text string) string {
		return fmt.Sprintf(`{"type":"message","channel":%q,"channel_type":"channel","user":%q,"text":%q,"ts":"1767225700.000200","thread_ts":%q}`,
			channel, user, text, thread)
	}
	for i, ev := range []string{
		reply("U0ANN0001", "C0DESK001", "1767225600.000100", "and for six people"),
		reply("U0BOB0001", "C0DESK001", "1767225600.000100", "me too"),
		reply("U0ANN0001", "C0DESK001", "1767225500.000050", "another thread"),
		reply("U0ANN0001", "C0OTHER01", "1767225600.000100", "another channel"),
		reply("U0ANN0001", "C0DESK001", "1767225600.000100", "<@U0BOT0001> with a mention"),
		`{"type":"message","channel":"C0DESK001","channel_type":"channel","user":"U0ANN0001","text":"top level","ts":"1767225600.000100","thread_ts":"1767225600.000100"}`,
		`{"type":"message","channel":"C0DESK001","channel_type":"mpim","user":"U0ANN0001","text":"group dm","ts":"1767225700.000300","thread_ts":"1767225600.000100"}`,
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(messageEvent(fmt.Sprintf("Ev20%05d", i), ev), testNow(), testSecret))
		if w.Code != http.StatusOK {
			t.Errorf("event %d: %d %s", i, w.Code, w.Body.String())
		}
	}
	dec.mu.Lock()
	defer dec.mu.Unlock()
	if len(dec.got) != 1 {
		t.Fatalf("%d events reached the decider, want the participant's reply only: %+v", len(dec.got), dec.got)
	}
	in := dec.got[0]
	if in.From != "U0ANN0001" || in.To != "C0DESK001/1767225600.000100" || len(in.Recipients) != 0 || in.Text != "and for six people" {
		t.Fatalf("the reply went on as %+v", in)
	}
}
