package twilio

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/envelope"
)

// turnDecider stands for the conversations router: it keeps what it got
// and answers that the message started a turn in conversation cnv_1.
type turnDecider struct {
	mu  sync.Mutex
	got []envelope.Inbound
}

func (d *turnDecider) HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, in)
	return envelope.InboundResult{Outcome: envelope.DispositionTurn, Conversation: "cnv_1"}, nil
}

func devReplyJSON(t *testing.T, dev *DevHandler, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/dev/reply", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	w := httptest.NewRecorder()
	dev.Reply(w, r)
	return w
}

// TestDevReplyStartsConversation: a JSON message without an approval code
// (text and two attachments, one by its bytes, one by URL) reaches the
// decider as the signed webhook's message would, with the number written
// to as its recipient and the attachments whole; the answer says the turn
// and conversation it started.
func TestDevReplyStartsConversation(t *testing.T) {
	db := openStore(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	dec := &turnDecider{}
	h, err := NewHandler(HandlerConfig{AuthToken: testToken, URL: hookURL, Now: func() time.Time { return now }}, db, dec, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := &DevHandler{Log: NewRecorderLog(10), Inbound: h, OurNumber: ourSMS, Now: func() time.Time { return now }}

	w := devReplyJSON(t, dev, `{"channel":"whatsapp","from":"`+alice+`","text":"Flights to Lisbon for six?",
		"media":[{"mediaType":"image/png","filename":"map.png","data":"iVBORw=="},
		         {"mediaType":"application/pdf","url":"https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1"}]}`)
	if w.Code != http.StatusOK {
		t.Fatalf("reply: %d %s", w.Code, w.Body)
	}
	var res DevReplyResult
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != "turn" || res.Conversation != "cnv_1" || res.Why != "" || res.Media != 2 || res.To != ourSMS || res.Channel != "whatsapp" {
		t.Errorf("result %+v", res)
	}
	// A second message of the same person: another message id, the same path.
	if w := devReplyJSON(t, dev, `{"channel":"whatsapp","from":"`+alice+`","text":"Make it seven."}`); w.Code != http.StatusOK {
		t.Fatalf("second: %d %s", w.Code, w.Body)
	}
	// The same first message, as Twilio would post it (signed).
	hook := url.Values{"MessageSid": {"SMfromtwilio"}, "From": {"whatsapp:" + alice}, "To": {"whatsapp:" + ourSMS},
		"WaId": {alice[1:]}, "Body": {"Flights to Lisbon for six?"}}
	r := httptest.NewRequest(http.MethodPost, "/v1/inbound/twilio", strings.NewReader(hook.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-Twilio-Signature", Signature(testToken, hookURL, hook))
	hw := httptest.NewRecorder()
	h.ServeHTTP(hw, r)
	if hw.Code != http.StatusOK {
		t.Fatalf("webhook: %d", hw.Code)
	}

	dec.mu.Lock()
	got := append([]envelope.Inbound(nil), dec.got...)
	dec.mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("decider got %d messages", len(got))
	}
	a, b := got[0], got[2]
	if a.MessageID == got[1].MessageID || !strings.HasPrefix(a.MessageID, "SM") {
		t.Errorf("message ids %q, %q", a.MessageID, got[1].MessageID)
	}
	if a.Channel != b.Channel || a.From != b.From || a.To != b.To || a.Text != b.Text || !reflect.DeepEqual(a.Recipients, []string{ourSMS}) ||
		a.FullText != "Flights to Lisbon for six?" {
		t.Errorf("dev message %+v\ndiffers from the webhook's %+v", a, b)
	}
	want := []envelope.InboundAttachment{
		{Filename: "map.png", MediaType: "image/png", Size: 4, Data: []byte{0x89, 'P', 'N', 'G'}},
		{MediaType: "application/pdf", URL: "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1"},
	}
	if !reflect.DeepEqual(a.Attachments, want) {
		t.Errorf("attachments %+v, want %+v", a.Attachments, want)
	}
	if got[1].Text != "Make it seven." || got[1].Attachments != nil {
		t.Errorf("second %+v", got[1])
	}
}

func TestDevReplyRefusesBadJSON(t *testing.T) {
	dev := &DevHandler{Log: NewRecorderLog(10), Inbound: newHook(t).h, OurNumber: ourSMS}
	bad := map[string]string{
		"unknown member":   `{"channel":"sms","from":"` + alice + `","body":"hi"}`,
		"channel":          `{"channel":"email","from":"` + alice + `","text":"hi"}`,
		"from":             `{"channel":"sms","from":"07700900123","text":"hi"}`,
		"to":               `{"channel":"sms","from":"` + alice + `","to":"ours","text":"hi"}`,
		"empty":            `{"channel":"sms","from":"` + alice + `"}`,
		"media both":       `{"channel":"sms","from":"` + alice + `","media":[{"mediaType":"image/png","data":"AA==","url":"https://x/y"}]}`,
		"media neither":    `{"channel":"sms","from":"` + alice + `","media":[{"mediaType":"image/png"}]}`,
		"media no type":    `{"channel":"sms","from":"` + alice + `","media":[{"data":"AA=="}]}`,
		"media url scheme": `{"channel":"sms","from":"` + alice + `","media":[{"mediaType":"image/png","url":"file:///etc/passwd"}]}`,
		"two values":       `{"channel":"sms","from":"` + alice + `","text":"a"} {}`,
		"too many media":   `{"channel":"sms","from":"` + alice + `","media":[` + strings.Repeat(`{"mediaType":"a/b","data":""},`, DevMaxMedia) + `{"mediaType":"a/b","data":""}]}`,
		"text too long":    `{"channel":"sms","from":"` + alice + `","text":"` + strings.Repeat("x", 1601) + `"}`,
	}
	for name, body := range bad {
		if w := devReplyJSON(t, dev, body); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
	big := `{"channel":"sms","from":"` + alice + `","media":[{"mediaType":"a/b","data":"` + strings.Repeat("A", (DevMaxMediaBytes/3+1)*4) + `"}]}`
	if w := devReplyJSON(t, dev, big); w.Code != http.StatusBadRequest {
		t.Errorf("media over the bound: %d", w.Code)
	}
}

func FuzzParseDevMessage(f *testing.F) {
	f.Add([]byte(`{"channel":"sms","from":"+447700900123","text":"hi","media":[{"mediaType":"image/png","data":"AA=="}]}`))
	f.Add([]byte(`{"channel":"whatsapp","from":"+447700900123","to":"+15550001111","buttonPayload":"a:b","media":[{"mediaType":"a/b","url":"https://x/y"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseDevMessage(b)
		if err != nil {
			return
		}
		if !isE164(m.From) || len(m.Media) > DevMaxMedia || (m.Channel != "sms" && m.Channel != "whatsapp") {
			t.Fatalf("accepted %+v", m)
		}
		for _, md := range m.Media {
			if (md.Data == nil) == (md.URL == "") || len(md.Data) > DevMaxMediaBytes {
				t.Fatalf("accepted media %+v", md)
			}
		}
	})
}

// TestRecorderKeepsConversation: an answer in a conversation is recorded
// as going out from the number the person wrote to, with its
// conversation; a window-template delivery is recorded as the template.
func TestRecorderKeepsConversation(t *testing.T) {
	log := NewRecorderLog(10)
	wa, err := NewRecorder("whatsapp", openStore(t), log, defaultRender(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	j := job("dlv_1", "whatsapp", alice, "Six seats to Lisbon are held.")
	j.Delivery.Extra = map[string]string{envelope.ExtraConversation: "cnv_1", envelope.ExtraFrom: "+15550002222"}
	if _, err := wa.Deliver(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	w := job("dlv_2", "whatsapp", alice, "Six seats to Lisbon are held.")
	w.Delivery.Extra = map[string]string{envelope.ExtraConversation: "cnv_1", envelope.ExtraFrom: "+15550002222", envelope.ExtraTemplate: "window"}
	if _, err := wa.Deliver(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	got := log.Messages()
	if len(got) != 2 || got[0].From != "+15550002222" || got[0].Conversation != "cnv_1" || !strings.Contains(got[0].Body, "Six seats") {
		t.Fatalf("recorded %+v", got)
	}
	if got[1].ContentSID != "window" || strings.Contains(got[1].Body, "Six seats") {
		t.Fatalf("window template recorded as %+v", got[1])
	}
}

func TestDevMediaFetcher(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("0123456789"))
	}))
	defer srv.Close()
	// The test server is on loopback, which only fetch.allow opens.
	allowed, err := fetch.New(fetch.Config{Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := DevMediaFetcher{Fetch: allowed}
	b, mt, err := f.FetchMedia(context.Background(), srv.URL+"/photo.png", 10)
	if err != nil || string(b) != "0123456789" || mt != "image/png" {
		t.Fatalf("fetch: %q %q %v", b, mt, err)
	}
	if _, _, err := f.FetchMedia(context.Background(), srv.URL+"/photo.png", 9); err == nil || !strings.Contains(err.Error(), "larger than 9") {
		t.Errorf("over the bound: %v", err)
	}
	if _, _, err := f.FetchMedia(context.Background(), srv.URL+"/missing?sig=secret", 10); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("missing: %v", err)
	}
	if _, _, err := f.FetchMedia(context.Background(), "file:///etc/passwd", 10); err == nil {
		t.Error("a file URL was read")
	}
}

// A media URL in a /dev/reply message is content: the dev fetcher goes
// through the guarded client, which refuses loopback, private and cloud
// metadata addresses (unless fetch.allow names them) before anything is
// sent, and says so permanently.
func TestDevMediaFetcherGuarded(t *testing.T) {
	hit := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit <- r.URL.Path
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("secret"))
	}))
	defer srv.Close()
	for _, u := range []string{srv.URL + "/internal.png", "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/x.png",
		"http://[::1]:9/x.png", "http://localhost:" + srv.URL[strings.LastIndexByte(srv.URL, ':')+1:] + "/internal.png"} {
		for name, f := range map[string]DevMediaFetcher{"default": {}, "guarded": {Fetch: mustFetch(t, fetch.Config{})}} {
			b, _, err := f.FetchMedia(context.Background(), u, 1<<20)
			var me *MediaError
			if !errors.As(err, &me) || !me.Permanent || !errors.Is(err, fetch.ErrRefused) || !strings.Contains(me.Reason, "refused") {
				t.Errorf("%s %s: %q %v, want a permanent refusal", name, u, b, err)
			}
		}
	}
	select {
	case p := <-hit:
		t.Errorf("the guard let a request to loopback through (%s)", p)
	default:
	}
}

func mustFetch(t *testing.T, c fetch.Config) *fetch.Client {
	t.Helper()
	f, err := fetch.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
