package twilio

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/render"
)

func defaultRender(t *testing.T) RenderFunc {
	t.Helper()
	r, err := render.New(render.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return Renderer(r, nil, nil)
}

// TestDevRecorderAndReply: without Twilio, a delivery is recorded (and
// listed by /dev/messages), and /dev/reply builds the same inbound message
// as a signed Twilio webhook would.
func TestDevRecorderAndReply(t *testing.T) {
	e := newHook(t)
	log := NewRecorderLog(10)
	wa, err := NewRecorder("whatsapp", e.db, log, defaultRender(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := wa.Deliver(context.Background(), approvalJob("dlv_1", "whatsapp", alice))
	if err != nil {
		t.Fatal(err)
	}
	dev := &DevHandler{Log: log, Inbound: e.h, OurNumber: "+15550002222", Now: func() time.Time { return e.now }}

	w := httptest.NewRecorder()
	dev.Messages(w, httptest.NewRequest("GET", "/dev/messages", nil))
	var list struct{ Messages []Recorded }
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Messages) != 1 || list.Messages[0].SID != res.ProviderID || list.Messages[0].To != alice ||
		!strings.Contains(list.Messages[0].Body, "Book BA2043 for 6 people") || len(list.Messages[0].Buttons) != 2 {
		t.Fatalf("recorded = %+v", list.Messages)
	}

	form := url.Values{"channel": {"whatsapp"}, "from": {alice}, "button_payload": {list.Messages[0].Buttons[0].Payload}, "button_text": {"Approve"}}
	r := httptest.NewRequest("POST", "/dev/reply", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	dev.Reply(w, r)
	if w.Code != 200 {
		t.Fatalf("reply: %d %s", w.Code, w.Body)
	}
	// The same message, as Twilio would have posted it.
	webhook := url.Values{"MessageSid": {"SMfromtwilio"}, "From": {"whatsapp:" + alice}, "To": {"whatsapp:+15550002222"},
		"WaId": {alice[1:]}, "ButtonPayload": {"apr_1:n0nce"}, "ButtonText": {"Approve"}, "Body": {""}}
	if w := e.post(webhook.Encode(), ""); w.Code != 200 {
		t.Fatalf("webhook: %d", w.Code)
	}
	got := e.dec.all()
	if len(got) != 2 {
		t.Fatalf("decider got %d", len(got))
	}
	a, b := got[0], got[1]
	a.MessageID, b.MessageID = "", ""
	if a.Channel != b.Channel || a.From != b.From || a.To != b.To || a.ButtonPayload != b.ButtonPayload || a.Text != b.Text || !a.ReceivedAt.Equal(b.ReceivedAt) {
		t.Errorf("dev reply %+v\n differs from webhook %+v", a, b)
	}
	if a.ButtonPayload != "apr_1:n0nce" {
		t.Errorf("payload %q", a.ButtonPayload)
	}

	bad := url.Values{"channel": {"sms"}, "from": {"07700900123"}, "body": {"YES"}}
	r = httptest.NewRequest("POST", "/dev/reply", strings.NewReader(bad.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	dev.Reply(w, r)
	if w.Code != http.StatusBadRequest {
		t.Errorf("non-E.164 from: %d", w.Code)
	}
}

func TestRecorderHonoursOptOut(t *testing.T) {
	db := openStore(t)
	db.PutKV(context.Background(), optOutKey("sms", alice), []byte("x"))
	rec, err := NewRecorder("sms", db, NewRecorderLog(10), defaultRender(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Deliver(context.Background(), job("dlv_1", "sms", alice, "hi")); !errors.Is(err, ErrOptedOut) {
		t.Fatalf("err = %v", err)
	}
}
