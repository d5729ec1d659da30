package slack

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

type recordingDecider struct {
	mu  sync.Mutex
	got []envelope.Inbound
	res envelope.InboundResult
}

func (d *recordingDecider) HandleInbound(_ context.Context, in envelope.Inbound) (envelope.InboundResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, in)
	return d.res, nil
}

type recordingNoter struct {
	mu    sync.Mutex
	notes []string
}

func (n *recordingNoter) Ephemeral(_ context.Context, channel, user, text string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = append(n.notes, channel+"/"+user+": "+text)
	return nil
}

const testSecret = "8f742231b10e8888abcd99aaabbb85a5"

func clickBody(user, value string) string {
	p := fmt.Sprintf(`{"type":"block_actions","user":{"id":%q},"team":{"id":"T1"},"channel":{"id":"D0123ABCD"},"container":{"message_ts":"1.2","channel_id":"D0123ABCD"},"actions":[{"action_id":"beachd_deny","value":%q,"action_ts":"3.4"},{"action_id":"someone_elses","value":"x"}]}`, user, value)
	return url.Values{"payload": {p}}.Encode()
}

func signed(body string, at time.Time, secret string) *http.Request {
	r := httptest.NewRequest("POST", "/v1/inbound/slack/interactions", strings.NewReader(body))
	ts := fmt.Sprint(at.Unix())
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderSignature, SignatureHeader(secret, ts, []byte(body)))
	return r
}

// A signed click reaches the decider as an inbound button press from the
// user who clicked; an unsigned, stale, oversized or malformed request
// reaches nothing; a click that decided nothing gets a private note.
func TestInteractionHandler(t *testing.T) {
	now := time.Unix(1767225600, 0)
	d := &recordingDecider{res: envelope.InboundResult{Outcome: "already-decided", Decision: "granted"}}
	n := &recordingNoter{}
	st := openStore(t)
	st.PutKV(context.Background(), emailKey("U012AB3CD"), []byte("alice@example.org"))
	h, err := NewInteractionHandler(InteractionConfig{SigningSecret: testSecret, Now: func() time.Time { return now }}, d, n, NewResolver(nil, st), nil)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(r *http.Request) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	body := clickBody("U012AB3CD", "apr_1:n0nce")
	for name, tc := range map[string]struct {
		r    *http.Request
		want int
	}{
		"wrong secret":  {signed(body, now, "00000000000000000000000000000000"), 401},
		"stale":         {signed(body, now.Add(-5*time.Minute-time.Second), testSecret), 401},
		"unsigned":      {httptest.NewRequest("POST", "/", strings.NewReader(body)), 401},
		"too large":     {signed(strings.Repeat("a", MaxRequestBytes+1), now, testSecret), 413},
		"not a payload": {signed("payload=%7Bnope", now, testSecret), 400},
		"no user":       {signed(clickBody("", "apr_1:n0nce"), now, testSecret), 400},
	} {
		if got := serve(tc.r); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
	if len(d.got) != 0 {
		t.Fatalf("refused requests reached the decider: %+v", d.got)
	}
	if got := serve(signed(body, now, testSecret)); got != 200 {
		t.Fatalf("signed click: %d", got)
	}
	if len(d.got) != 1 {
		t.Fatalf("decider got %d messages, want the one click of ours", len(d.got))
	}
	in := d.got[0]
	if in.Channel != "slack" || in.From != "U012AB3CD" || in.To != "D0123ABCD" || in.ButtonPayload != "apr_1:n0nce" ||
		in.MessageID != "slack-click:D0123ABCD:U012AB3CD:3.4" || len(in.SenderAliases) != 1 || in.SenderAliases[0] != "alice@example.org" {
		t.Errorf("inbound %+v", in)
	}
	if len(n.notes) != 1 || !strings.Contains(n.notes[0], "D0123ABCD/U012AB3CD: This request was already approved") {
		t.Errorf("notes %q", n.notes)
	}
	// Another workspace's click is refused when the team is configured.
	h.cfg.TeamID = "T2"
	serve(signed(body, now, testSecret))
	if len(d.got) != 1 || !strings.Contains(n.notes[len(n.notes)-1], "another workspace") {
		t.Errorf("a click from another workspace: %d inbound, notes %q", len(d.got), n.notes)
	}
}

func FuzzParseInteraction(f *testing.F) {
	f.Add([]byte(clickBody("U012AB3CD", "apr_1:n0nce")))
	f.Add([]byte("payload=%7B%22type%22%3A%22block_actions%22%7D"))
	f.Add([]byte("payload=null"))
	f.Add([]byte("payload=%7B%22type%22%3A%22view_submission%22%7D&x=%zz"))
	f.Fuzz(func(t *testing.T, body []byte) {
		clicks, err := ParseInteraction(body)
		if err != nil && clicks != nil {
			t.Fatal("clicks with an error")
		}
		for _, c := range clicks {
			if !envelope.SlackUser(c.User) || (c.ActionID != "beachd_approve" && c.ActionID != "beachd_deny") || len(c.Value) > 2000 {
				t.Fatalf("click %+v passed", c)
			}
		}
		if len(clicks) > 5 {
			t.Fatalf("%d clicks", len(clicks))
		}
	})
}
