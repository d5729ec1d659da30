package conversations

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/channels/twilio"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

const (
	mediaAccount = "AC0123456789abcdef0123456789abcdef"
	mediaToken   = "12345authtoken67890"
)

// twilioMediaHost is an httptest server shaped like Twilio's API host for
// media URLs: it checks the account's basic auth and answers each media
// SID with the status its name ends in (ME…200 answers a PNG), counting the
// requests.
type twilioMediaHost struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func startTwilioMediaHost(t *testing.T) *twilioMediaHost {
	h := &twilioMediaHost{hits: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != mediaAccount || p != mediaToken {
			http.Error(w, `{"code":20003,"message":"Authenticate","status":401}`, http.StatusUnauthorized)
			return
		}
		sid := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		h.mu.Lock()
		h.hits[sid]++
		h.mu.Unlock()
		switch {
		case strings.HasSuffix(sid, "200"):
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG\r\n\x1a\nimage"))
		case strings.HasSuffix(sid, "403"):
			http.Error(w, `{"code":20403,"message":"Forbidden","status":403}`, http.StatusForbidden)
		case strings.HasSuffix(sid, "404"):
			http.Error(w, `{"code":20404,"message":"The requested resource was not found","status":404}`, http.StatusNotFound)
		default:
			http.Error(w, `{"code":20500,"message":"Internal Server Error","status":500}`, http.StatusInternalServerError)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *twilioMediaHost) url(sid string) string {
	return h.URL + "/2010-04-01/Accounts/" + mediaAccount + "/Messages/MM0123456789abcdef0123456789abcdef/Media/" + sid
}

func (h *twilioMediaHost) requests(sid string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[sid]
}

// client is the real Twilio client, its API base this host.
func (h *twilioMediaHost) client(t *testing.T) *twilio.Client {
	fc, err := fetch.New(fetch.Config{Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := twilio.NewClient(twilio.ClientConfig{AccountSID: mediaAccount, AuthToken: mediaToken, APIBaseURL: h.URL,
		Timeout: 5 * time.Second, MediaFetch: fc})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func whatsAppWithMedia(msgID string, urls ...string) envelope.Inbound {
	in := envelope.Inbound{Channel: "whatsapp", From: "whatsapp:+447700900004", To: "whatsapp:+15550002222", MessageID: msgID, Text: "see the photos"}
	for _, u := range urls {
		in.Attachments = append(in.Attachments, envelope.InboundAttachment{URL: u, MediaType: "image/png"})
	}
	return in
}

// lastSent is the last message the fake agent was sent, with its metadata
// as JSON.
func lastSent(t *testing.T, fa *fakeAgent) (texts []string, files int, meta string) {
	t.Helper()
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if len(fa.sent) == 0 {
		t.Fatal("nothing was sent to the agent")
	}
	msg := fa.sent[len(fa.sent)-1]
	for _, p := range msg.Parts {
		if p.Text != nil {
			texts = append(texts, *p.Text)
		} else {
			files++
		}
	}
	b, err := json.Marshal(msg.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	return texts, files, string(b)
}

// Media that Twilio refuses (403, 404) is fetched once: the turn goes to
// the agent at its first attempt without it, with a note saying which
// attachment is missing and why, in its text and its metadata.
func TestRefusedMediaIsPermanent(t *testing.T) {
	host := startTwilioMediaHost(t)
	fa := &fakeAgent{}
	h := newHarness(t, opts{agent: fa, cfg: func(c *Config) { c.Media = host.client(t) }})
	res := h.in(whatsAppWithMedia("MMrefused", host.url("ME200"), host.url("ME403"), host.url("ME404")))
	turn := h.waitTurn(res, "MMrefused", "whatsapp")
	if turn.State != store.TurnAnswered || turn.Attempts != 1 {
		t.Fatalf("turn %s after %d attempts: %s", turn.State, turn.Attempts, turn.LastError)
	}
	texts, files, meta := lastSent(t, fa)
	if files != 1 || len(texts) != 2 || texts[0] != "see the photos" {
		t.Fatalf("parts: texts %q, %d files", texts, files)
	}
	want := "[Attachment 2 of 3 (image/png) is not included: could not be fetched: Twilio answered HTTP 403 (Forbidden).]\n" +
		"[Attachment 3 of 3 (image/png) is not included: could not be fetched: Twilio answered HTTP 404 (Not Found).]"
	if texts[1] != want {
		t.Fatalf("note %q\nwant %q", texts[1], want)
	}
	for _, w := range []string{`"attachmentsMissing":[{"index":1,`, `"reason":"could not be fetched: Twilio answered HTTP 403 (Forbidden)"`, `{"index":2,`} {
		if !strings.Contains(meta, w) {
			t.Errorf("metadata %s lacks %s", meta, w)
		}
	}
	for sid, n := range map[string]int{"ME200": 1, "ME403": 1, "ME404": 1} {
		if got := host.requests(sid); got != n {
			t.Errorf("%s fetched %d times, want %d", sid, got, n)
		}
	}
	rec, _ := h.db.InboundByMessageID(h.ctx, "whatsapp", "MMrefused")
	if a := rec.Attachments[1]; a.Stored || a.FetchFailures != 1 || a.Note != "could not be fetched: Twilio answered HTTP 403 (Forbidden)" {
		t.Fatalf("refused attachment on the record %+v", a)
	}
	if a := rec.Attachments[0]; !a.Stored {
		t.Fatalf("fetched attachment on the record %+v", a)
	}
}

// Media that fails with a 5xx is tried again with the turn, a few times
// (MediaAttempts), then the turn goes on without it; never for 24 hours.
func TestFailingMediaIsTriedAFewTimes(t *testing.T) {
	host := startTwilioMediaHost(t)
	fa := &fakeAgent{}
	h := newHarness(t, opts{agent: fa, cfg: func(c *Config) { c.Media = host.client(t) }})
	res := h.in(whatsAppWithMedia("MMflaky", host.url("ME500")))
	turn := h.waitTurn(res, "MMflaky", "whatsapp")
	if turn.State != store.TurnAnswered || turn.Attempts != 3 {
		t.Fatalf("turn %s after %d attempts: %s", turn.State, turn.Attempts, turn.LastError)
	}
	if n := host.requests("ME500"); n != 3 {
		t.Fatalf("ME500 fetched %d times, want 3", n)
	}
	texts, files, _ := lastSent(t, fa)
	if files != 0 || len(texts) != 2 ||
		texts[1] != "[Attachment 1 of 1 (image/png) is not included: could not be fetched: Twilio answered HTTP 500 (Internal Server Error) (3 tries).]" {
		t.Fatalf("parts: texts %q, %d files", texts, files)
	}
}

// After MediaRetryFor since the message came, a failing fetch is the last.
func TestFailingMediaIsGivenUpAfterMediaRetryFor(t *testing.T) {
	host := startTwilioMediaHost(t)
	fa := &fakeAgent{}
	h := newHarness(t, opts{agent: fa, cfg: func(c *Config) {
		c.Media = host.client(t)
		c.MediaAttempts = 100
		c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour // the test moves the clock
	}})
	res := h.in(whatsAppWithMedia("MMslow", host.url("ME500")))
	poll.Eventually(t, 10*time.Second, "the first failed fetch", func() bool { return host.requests("ME500") == 1 })
	h.clock.Advance(2 * time.Hour) // past MediaRetryFor (10m) and the backoff
	h.r.Wake()
	turn := h.waitTurn(res, "MMslow", "whatsapp")
	if turn.State != store.TurnAnswered || host.requests("ME500") != 2 {
		t.Fatalf("turn %s after %d attempts, %d fetches", turn.State, turn.Attempts, host.requests("ME500"))
	}
	texts, _, _ := lastSent(t, fa)
	if len(texts) != 2 || !strings.HasSuffix(texts[1], "(2 tries).]") {
		t.Fatalf("texts %q", texts)
	}
}
