package approvals

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/cool-ai/beachd/envelope"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// No token, code or button payload is stored in clear, and none is logged,
// through every path that handles one.
func TestTokensNeitherStoredNorLogged(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	logs := &syncBuf{}
	h.svc.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.inj.log = h.svc.log
	env := h.suspend("appr-secret")
	ds := h.ingest(env, email(alice), sms(aliceNum), wa(bobNum))
	he, hs, hw := h.handle(ds[0]), h.handle(ds[1]), h.handle(ds[2])
	link := strings.TrimPrefix(he.LinkURL, "https://beachd.example.org/a/")
	secrets := []string{he.Token, link, hs.Code, hw.Code, hw.Buttons[0].Payload, hw.Buttons[1].Payload}

	mux := http.NewServeMux()
	mux.Handle("/a/{token}", h.svc.LinkHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	res, _ := http.Get(srv.URL + "/a/" + link)
	body := readAll(t, res)
	nonce := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(body)[1]
	h.inbound(envelope.Inbound{Channel: "email", From: bob, MessageID: "<x1>", Token: he.Token, Text: "yes"})
	h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "S1", Text: "maybe " + hs.Code})
	h.inbound(envelope.Inbound{Channel: "whatsapp", From: aliceNum, MessageID: "W1", ButtonPayload: hw.Buttons[0].Payload})
	res, _ = http.PostForm(srv.URL+"/a/"+link, url.Values{"decision": {"granted"}, "nonce": {nonce}})
	res.Body.Close()
	h.waitReceived(1)
	h.settle()
	h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<x2>", Token: he.Token, Text: "no"})

	raw, err := os.ReadFile(h.db.Path())
	if err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "approval decided") {
		t.Fatalf("the test logged nothing useful:\n%s", out)
	}
	for _, s := range secrets {
		// Codes are matched as whole numbers: six digits may occur by
		// chance inside longer numbers (timestamps).
		re := regexp.MustCompile(`(^|[^0-9])` + regexp.QuoteMeta(s) + `($|[^0-9])`)
		if re.Match(raw) {
			t.Errorf("%q is stored in clear", s)
		}
		if re.MatchString(out) {
			t.Errorf("%q is in the logs", s)
		}
		// Confirmations become stored envelopes (here the fake keeps them
		// in memory): no answer handle may be in one.
		h.enq.mu.Lock()
		for _, c := range h.enq.sent {
			if re.MatchString(c.Text) {
				t.Errorf("%q is in the confirmation to %s: %q", s, c.To.Address, c.Text)
			}
		}
		h.enq.mu.Unlock()
	}
	// The not-understood SMS is answered with the request again, its code
	// rendered at send time: the stored answer (in the file read above)
	// holds none.
	if told := h.told(aliceNum); len(told) != 1 || !strings.Contains(told[0], "Reply YES "+hs.Code) {
		t.Fatalf("the not-understood SMS got %q, want the request with its code", told)
	}
}
