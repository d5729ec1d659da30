package twilio

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	twclient "github.com/twilio/twilio-go/client"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
)

const hookURL = "https://beachd.example.org/v1/inbound/twilio"

// TestSignaturePublishedExample checks the validation example Twilio
// publishes (auth token 12345, the mycompany.com URL and these parameters).
func TestSignaturePublishedExample(t *testing.T) {
	u := "https://mycompany.com/myapp.php?foo=1&bar=2"
	params := url.Values{
		"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+14158675309"}, "Digits": {"1234"},
		"From": {"+14158675309"}, "To": {"+18005551212"},
	}
	if got := Signature("12345", u, params); got != "RSOYDt4T1cUTdK1PDd93/VVr8B8=" {
		t.Errorf("signature = %q, want Twilio's published RSOYDt4T1cUTdK1PDd93/VVr8B8=", got)
	}
	if !ValidSignature("12345", u, params, "RSOYDt4T1cUTdK1PDd93/VVr8B8=") {
		t.Error("published example rejected")
	}
	// twilio-go's own test vector: two more parameters.
	params.Set("ReasonConferenceEnded", "test")
	params.Set("Reason", "Participant")
	if !ValidSignature("12345", u, params, "vOEb5UThFn24KEfnOFLQY2AE5FY=") {
		t.Error("twilio-go's vector rejected")
	}
	// With the default port written out, as Twilio sometimes signs.
	if !ValidSignature("12345", "https://mycompany.com:443/myapp.php?foo=1&bar=2", params, "vOEb5UThFn24KEfnOFLQY2AE5FY=") {
		t.Error("port variant rejected")
	}
	for name, bad := range map[string]func() bool{
		"other token": func() bool { return ValidSignature("12346", u, params, "vOEb5UThFn24KEfnOFLQY2AE5FY=") },
		"other URL":   func() bool { return ValidSignature("12345", u+"&x=1", params, "vOEb5UThFn24KEfnOFLQY2AE5FY=") },
		"http not https": func() bool {
			return ValidSignature("12345", strings.Replace(u, "https", "http", 1), params, "vOEb5UThFn24KEfnOFLQY2AE5FY=")
		},
		"empty": func() bool { return ValidSignature("12345", u, params, "") },
	} {
		if bad() {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSignatureAgreesWithTwilioGo checks our signer against twilio-go's
// RequestValidator on real-shaped webhook bodies.
func TestSignatureAgreesWithTwilioGo(t *testing.T) {
	v := twclient.NewRequestValidator(testToken)
	for _, name := range []string{"sms_inbound.form", "whatsapp_button.form", "status_delivered.form", "status_undelivered.form"} {
		body := readTestdata(t, name)
		form, err := url.ParseQuery(body)
		if err != nil {
			t.Fatal(err)
		}
		sig := Signature(testToken, hookURL, form)
		if !v.ValidateBody(hookURL, []byte(body), sig) {
			t.Errorf("%s: twilio-go rejects our signature", name)
		}
	}
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

type hookEnv struct {
	h   *Handler
	db  *bolt.DB
	dec *recordingDecider
	now time.Time
}

func newHook(t testing.TB) *hookEnv {
	t.Helper()
	db := openStore(t)
	dec := &recordingDecider{}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h, err := NewHandler(HandlerConfig{AuthToken: testToken, URL: hookURL, Now: func() time.Time { return now }}, db, dec, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &hookEnv{h: h, db: db, dec: dec, now: now}
}

// post sends body signed (sig "" means: sign it correctly).
func (e *hookEnv) post(body, sig string) *httptest.ResponseRecorder {
	if sig == "" {
		form, _ := url.ParseQuery(body)
		sig = Signature(testToken, hookURL, form)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/inbound/twilio", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if sig != "-" {
		r.Header.Set("X-Twilio-Signature", sig)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

func TestInboundSMSReachesApprovals(t *testing.T) {
	e := newHook(t)
	w := e.post(readTestdata(t, "sms_inbound.form"), "")
	if w.Code != 200 || w.Body.String() != emptyTwiML || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/xml") {
		t.Fatalf("answer %d %q %q", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}
	got := e.dec.all()
	if len(got) != 1 {
		t.Fatalf("decider got %d messages", len(got))
	}
	in := got[0]
	want := envelope.Inbound{Channel: "sms", From: "+447700900123", To: "+15550001111", MessageID: "SM1f0e8ae6ade43cb3c0ce4525424e404f",
		Text: "YES 4821 looks good", ReceivedAt: e.now}
	if in.Channel != want.Channel || in.From != want.From || in.To != want.To || in.MessageID != want.MessageID || in.Text != want.Text || !in.ReceivedAt.Equal(want.ReceivedAt) {
		t.Errorf("inbound = %+v\nwant      %+v", in, want)
	}
	// The approval's trail records that the request was signed.
	if in.Evidence["twilioSignature"] != "valid" {
		t.Errorf("evidence %v", in.Evidence)
	}
}

func TestInboundWhatsAppButtonOpensTheWindow(t *testing.T) {
	e := newHook(t)
	if w := e.post(readTestdata(t, "whatsapp_button.form"), ""); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	got := e.dec.all()
	if len(got) != 1 {
		t.Fatalf("decider got %d", len(got))
	}
	in := got[0]
	if in.Channel != "whatsapp" || in.From != "+447700900123" || in.ButtonPayload != "apr_1:n0nce" ||
		in.Text != "Approve" || in.InReplyTo != "SMb7c0a2ce80504485a6f653a7110836f5" {
		t.Errorf("inbound = %+v", in)
	}
	v, ok, _ := e.db.GetKV(context.Background(), windowKey("+447700900123"))
	if !ok || string(v) != e.now.Format(time.RFC3339Nano) {
		t.Errorf("window = %q %v", v, ok)
	}
}

func TestDuplicateWebhookHasNoSecondEffect(t *testing.T) {
	e := newHook(t)
	body := readTestdata(t, "sms_inbound.form")
	for i := 0; i < 3; i++ {
		if w := e.post(body, ""); w.Code != 200 {
			t.Fatalf("try %d: status %d", i, w.Code)
		}
	}
	if n := len(e.dec.all()); n != 1 {
		t.Errorf("decider called %d times, want 1", n)
	}
}

// TestRetryAfterStopBeforeDecisionIsDecided: beachd stopped after marking
// the message seen and before the decider recorded it (no answer reached
// Twilio); Twilio's retry is handed to the decider, once.
func TestRetryAfterStopBeforeDecisionIsDecided(t *testing.T) {
	e := newHook(t)
	if _, err := e.db.MarkSeen(context.Background(), "msg/SM1f0e8ae6ade43cb3c0ce4525424e404f"); err != nil {
		t.Fatal(err)
	}
	body := readTestdata(t, "sms_inbound.form")
	for i := 0; i < 2; i++ {
		if w := e.post(body, ""); w.Code != 200 {
			t.Fatalf("try %d: status %d", i, w.Code)
		}
	}
	if n := len(e.dec.all()); n != 1 {
		t.Errorf("decider called %d times, want 1", n)
	}
}

func TestDeciderFailureLetsTwilioRetry(t *testing.T) {
	e := newHook(t)
	body := readTestdata(t, "sms_inbound.form")
	e.dec.err = errors.New("database is busy")
	if w := e.post(body, ""); w.Code != 500 {
		t.Fatalf("status %d, want 500", w.Code)
	}
	e.dec.err = nil
	if w := e.post(body, ""); w.Code != 200 || len(e.dec.all()) != 1 {
		t.Fatalf("retry: status %d, decider got %d", w.Code, len(e.dec.all()))
	}
}

func TestBadWebhooksAreRefusedWithoutEffect(t *testing.T) {
	good := readTestdata(t, "sms_inbound.form")
	form, _ := url.ParseQuery(good)
	otherURL := Signature(testToken, "https://beachd.example.org/v1/inbound/twilio?x=1", form)
	otherToken := Signature("not-the-token", hookURL, form)
	tampered := strings.Replace(good, "YES", "NO", 1)
	goodSig := Signature(testToken, hookURL, form)
	cases := []struct {
		name   string
		method string
		ctype  string
		body   string
		sig    string
		want   int
	}{
		{"unsigned", "POST", "", good, "-", 403},
		{"signed for another URL", "POST", "", good, otherURL, 403},
		{"signed with another token", "POST", "", good, otherToken, 403},
		{"tampered body", "POST", "", tampered, goodSig, 403},
		{"garbage signature", "POST", "", good, "bm90IGEgc2lnbmF0dXJl", 403},
		{"GET", "GET", "", "", "x", 405},
		{"JSON body", "POST", "application/json", `{"Body":"YES"}`, "x", 415},
		{"huge body", "POST", "", "Body=" + strings.Repeat("a", 70<<10), "x", 413},
		{"malformed form", "POST", "", "Body=%zz&From=%", "x", 400},
		{"signed but no MessageSid", "POST", "", "Body=YES&From=%2B447700900123", "", 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newHook(t)
			sig := tc.sig
			if sig == "" {
				f, _ := url.ParseQuery(tc.body)
				sig = Signature(testToken, hookURL, f)
			}
			r := httptest.NewRequest(tc.method, "/v1/inbound/twilio", strings.NewReader(tc.body))
			ct := tc.ctype
			if ct == "" {
				ct = "application/x-www-form-urlencoded"
			}
			r.Header.Set("Content-Type", ct)
			if sig != "-" {
				r.Header.Set("X-Twilio-Signature", sig)
			}
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
			if n := len(e.dec.all()); n != 0 {
				t.Errorf("decider called %d times", n)
			}
		})
	}
}

func TestStopAndStartWords(t *testing.T) {
	e := newHook(t)
	ctx := context.Background()
	send := func(sid, body string) {
		t.Helper()
		v := url.Values{"MessageSid": {sid}, "From": {alice}, "To": {ourSMS}, "Body": {body}, "SmsStatus": {"received"}, "AccountSid": {testAccount}}
		if w := e.post(v.Encode(), ""); w.Code != 200 {
			t.Fatalf("%s: status %d", body, w.Code)
		}
	}
	out := func() bool {
		ok, err := optedOut(ctx, e.db, "sms", alice)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	send("SM01", "Stop")
	if !out() {
		t.Fatal("STOP did not opt out")
	}
	got := e.dec.all()
	if len(got) != 1 || !strings.HasPrefix(got[0].IgnoredBecause, "opt-out") {
		t.Errorf("decider got %+v: an opt-out must reach approvals only as ignored", got)
	}
	send("SM02", "yes")
	if !out() {
		t.Error("YES cleared the opt-out; only START and UNSTOP may")
	}
	if got := e.dec.all(); got[1].IgnoredBecause != "" {
		t.Errorf("YES marked ignored: %+v", got[1])
	}
	send("SM03", " unstop! ")
	if out() {
		t.Error("UNSTOP did not clear the opt-out")
	}
	for i, w := range []string{"STOPALL", "unsubscribe", "CANCEL", "end", "Quit", "OPTOUT", "stop all"} {
		send("SM1"+string(rune('a'+i)), w)
		if !out() {
			t.Errorf("%q did not opt out", w)
		}
		send("SM2"+string(rune('a'+i)), "START")
		if out() {
			t.Errorf("START after %q did not opt in", w)
		}
	}
	send("SM30", "please stop the booking")
	if out() {
		t.Error("a sentence containing stop opted out")
	}
}

func TestStatusCallbacks(t *testing.T) {
	e := newHook(t)
	ctx := context.Background()
	sid := "SMb7c0a2ce80504485a6f653a7110836f5"
	id := e.sentSMS(t, sid, nil)
	status := func() *store.Delivery {
		d, err := e.db.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cb := func(st, code string) int {
		v := url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "MessageStatus": {st}, "SmsStatus": {st}, "To": {alice}, "From": {ourSMS}, "AccountSid": {testAccount}, "ApiVersion": {"2010-04-01"}}
		if code != "" {
			v.Set("ErrorCode", code)
		}
		return e.post(v.Encode(), "").Code
	}
	if c := cb("sent", ""); c != 200 || status().ProviderStatus != "sent" {
		t.Fatalf("sent: %d %q", c, status().ProviderStatus)
	}
	if c := cb("delivered", ""); c != 200 || status().ProviderStatus != "delivered" {
		t.Fatalf("delivered: %d %q", c, status().ProviderStatus)
	}
	// A late "sent" does not undo "delivered".
	if cb("sent", ""); status().ProviderStatus != "delivered" {
		t.Errorf("late sent overwrote: %q", status().ProviderStatus)
	}
	before := status().UpdatedAt
	if cb("delivered", ""); !status().UpdatedAt.Equal(before) {
		t.Error("duplicate callback had an effect")
	}
	// Unknown SIDs: 200, no effect.
	v := url.Values{"MessageSid": {"SMffffffffffffffffffffffffffffffff"}, "MessageStatus": {"failed"}, "To": {alice}}
	if w := e.post(v.Encode(), ""); w.Code != 200 {
		t.Errorf("unknown sid: %d", w.Code)
	}
	if len(e.dec.all()) != 0 {
		t.Error("status callbacks reached approvals")
	}
}

func TestStatusCallbackUndeliveredRecordsTheReason(t *testing.T) {
	e := newHook(t)
	ctx := context.Background()
	id := e.sentSMS(t, "SMb7c0a2ce80504485a6f653a7110836f5", nil)
	if w := e.post(readTestdata(t, "status_undelivered.form"), ""); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	d, _ := e.db.Delivery(ctx, id)
	if d.ProviderStatus != "undelivered" || !strings.Contains(d.LastError, "30006") {
		t.Errorf("delivery = %q %q", d.ProviderStatus, d.LastError)
	}
}

// sentSMS stores an SMS to alice as sent with sid (and receipt), as the
// dispatcher would, and returns its delivery id.
func (e *hookEnv) sentSMS(t testing.TB, sid string, receipt []byte) string {
	t.Helper()
	ctx := context.Background()
	res, err := e.db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "sms", To: alice}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Deliveries[0].ID
	claimed, err := e.db.Claim(ctx, 1, time.Minute, nil)
	if err != nil || len(claimed) != 1 {
		t.Fatal(err)
	}
	if _, err := e.db.Record(ctx, id, claimed[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: sid,
		Attempt: store.Attempt{N: 1, Outcome: "sent", Receipt: receipt}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestStatusOfAMessageInParts: an SMS sent as two messages has one status.
// It follows the first message; the second's success is not news, and a
// failure of either stands, whatever comes after it.
func TestStatusOfAMessageInParts(t *testing.T) {
	e := newHook(t)
	ctx := context.Background()
	first, second := "SMb7c0a2ce80504485a6f653a7110836f5", "SMc8d1b3df91615596b7a764b8221947a6"
	id := e.sentSMS(t, first, []byte(`{"data":{"status":"queued"},"meta":{"source":"twilio","sid":"`+first+`","parts":["`+first+`","`+second+`"]}}`))
	cb := func(sid, st, code string) *store.Delivery {
		t.Helper()
		v := url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "MessageStatus": {st}, "SmsStatus": {st}, "To": {alice}, "From": {ourSMS}, "AccountSid": {testAccount}, "ApiVersion": {"2010-04-01"}}
		if code != "" {
			v.Set("ErrorCode", code)
		}
		if c := e.post(v.Encode(), "").Code; c != 200 {
			t.Fatalf("%s %s: HTTP %d", sid, st, c)
		}
		d, err := e.db.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := cb(second, "delivered", ""); d.ProviderStatus != "" {
		t.Fatalf("the second part's success set the status: %q", d.ProviderStatus)
	}
	if d := cb(first, "sent", ""); d.ProviderStatus != "sent" {
		t.Fatalf("first part sent: %q", d.ProviderStatus)
	}
	if d := cb(second, "undelivered", "30006"); d.ProviderStatus != "undelivered" || !strings.Contains(d.LastError, "30006") || !strings.Contains(d.LastError, second) {
		t.Fatalf("second part undelivered: %q %q", d.ProviderStatus, d.LastError)
	}
	if d := cb(first, "delivered", ""); d.ProviderStatus != "undelivered" {
		t.Fatalf("the first part's success overwrote the second's failure: %q", d.ProviderStatus)
	}
}

// heldStore holds the UpdateProviderStatus of the request whose context
// carries sid until released, as a slow request would be.
type heldStore struct {
	*bolt.DB
	sid     string
	reached chan struct{}
	release chan struct{}
}

func (h *heldStore) UpdateProviderStatus(ctx context.Context, id string, decide func(*store.Delivery) (string, string, bool)) (*store.Delivery, bool, error) {
	if ctx.Value(sidKey{}) == h.sid { // only the held request carries it
		close(h.reached)
		<-h.release
	}
	return h.DB.UpdateProviderStatus(ctx, id, decide)
}

type sidKey struct{}

// TestConcurrentPartCallbacksKeepTheFailure: the first part's "delivered"
// is held after its handler looked the delivery up, while the second
// part's "undelivered" is recorded; the first then finds the failure and
// keeps it, because the decision is taken against the stored status inside
// the write, not against what the handler read before.
func TestConcurrentPartCallbacksKeepTheFailure(t *testing.T) {
	e := newHook(t)
	ctx := context.Background()
	first, second := "SMb7c0a2ce80504485a6f653a7110836f5", "SMc8d1b3df91615596b7a764b8221947a6"
	id := e.sentSMS(t, first, []byte(`{"data":{"status":"queued"},"meta":{"source":"twilio","sid":"`+first+`","parts":["`+first+`","`+second+`"]}}`))
	held := &heldStore{DB: e.db, sid: first, reached: make(chan struct{}), release: make(chan struct{})}
	h, err := NewHandler(HandlerConfig{AuthToken: testToken, URL: hookURL, Now: func() time.Time { return e.now }}, held, e.dec, nil)
	if err != nil {
		t.Fatal(err)
	}
	form := func(sid, st, code string) url.Values {
		v := url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "MessageStatus": {st}, "SmsStatus": {st}, "To": {alice}, "From": {ourSMS}, "AccountSid": {testAccount}, "ApiVersion": {"2010-04-01"}}
		if code != "" {
			v.Set("ErrorCode", code)
		}
		return v
	}
	done := make(chan int, 1)
	go func() {
		code, _ := h.statusCallback(context.WithValue(ctx, sidKey{}, first), first, "delivered", "", form(first, "delivered", ""))
		done <- code
	}()
	<-held.reached
	if code, msg := h.statusCallback(ctx, second, "undelivered", "30006", form(second, "undelivered", "30006")); code != 200 {
		t.Fatalf("second part: %d %s", code, msg)
	}
	close(held.release)
	if code := <-done; code != 200 {
		t.Fatalf("first part: %d", code)
	}
	d, err := e.db.Delivery(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.ProviderStatus != "undelivered" || !strings.Contains(d.LastError, "30006") {
		t.Fatalf("status %q (%q); want the second part's failure kept", d.ProviderStatus, d.LastError)
	}
}

func TestInboundRecipientsFullTextAndMedia(t *testing.T) {
	e := newHook(t)
	if w := e.post(readTestdata(t, "whatsapp_media.form"), ""); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	got := e.dec.all()
	if len(got) != 1 {
		t.Fatalf("decider got %d", len(got))
	}
	in := got[0]
	if in.Channel != "whatsapp" || len(in.Recipients) != 1 || in.Recipients[0] != "+15550002222" {
		t.Errorf("recipients = %q (channel %s)", in.Recipients, in.Channel)
	}
	if in.FullText != "Here are the passports  " || in.Text != "Here are the passports" {
		t.Errorf("full text %q, text %q", in.FullText, in.Text)
	}
	base := "https://api.twilio.com/2010-04-01/Accounts/" + testAccount + "/Messages/MM7d9b3c2a1e0f4a5b8c6d7e8f9a0b1c2d/Media/"
	want := []envelope.InboundAttachment{
		{URL: base + "ME0a1b2c3d4e5f60718293a4b5c6d7e8f9", MediaType: "image/jpeg"},
		{URL: base + "ME1a1b2c3d4e5f60718293a4b5c6d7e8f9", MediaType: "application/pdf"},
	}
	if len(in.Attachments) != len(want) {
		t.Fatalf("attachments = %+v (the off-host one must be dropped)", in.Attachments)
	}
	for i, a := range in.Attachments {
		if a.URL != want[i].URL || a.MediaType != want[i].MediaType || a.Data != nil || a.Size != 0 {
			t.Errorf("attachment %d = %+v, want %+v", i, a, want[i])
		}
	}
	// An SMS: the To number, no media.
	e2 := newHook(t)
	e2.post(readTestdata(t, "sms_inbound.form"), "")
	if in := e2.dec.all()[0]; len(in.Recipients) != 1 || in.Recipients[0] != "+15550001111" || in.Attachments != nil || in.FullText != "YES 4821 looks good" {
		t.Errorf("sms inbound = %+v", in)
	}
}

func TestInboundMediaBounds(t *testing.T) {
	media := func(i int) string {
		return "https://api.twilio.com/2010-04-01/Accounts/" + testAccount + "/Messages/MM1/Media/ME" + strconv.Itoa(i)
	}
	form := url.Values{"NumMedia": {"25"}}
	for i := range 25 {
		form.Set("MediaUrl"+strconv.Itoa(i), media(i))
		form.Set("MediaContentType"+strconv.Itoa(i), "Image/JPEG; q=1")
	}
	atts, notes := mediaFromForm(form)
	if len(atts) != maxInboundMedia || len(notes) != 1 || !strings.Contains(notes[0], "only the first 10") {
		t.Fatalf("%d attachments, notes %q", len(atts), notes)
	}
	if atts[9].URL != media(9) || atts[0].MediaType != "image/jpeg" {
		t.Errorf("attachments = %+v", atts)
	}
	for _, tc := range []struct {
		form  url.Values
		atts  int
		notes int
	}{
		{url.Values{"NumMedia": {"-1"}}, 0, 1},
		{url.Values{"NumMedia": {"two"}}, 0, 1},
		{url.Values{"NumMedia": {"0"}}, 0, 0},
		{url.Values{"NumMedia": {"2"}, "MediaUrl0": {media(0)}}, 1, 1},                               // MediaUrl1 missing
		{url.Values{"NumMedia": {"1"}, "MediaUrl0": {"http://api.twilio.com/x/Media/y"}}, 0, 1},      // not https
		{url.Values{"NumMedia": {"1"}, "MediaUrl0": {media(0)}, "MediaContentType0": {"%%%"}}, 1, 0}, // type unreadable: ""
	} {
		atts, notes := mediaFromForm(tc.form)
		if len(atts) != tc.atts || len(notes) != tc.notes {
			t.Errorf("%v: %d attachments %+v, notes %q", tc.form, len(atts), atts, notes)
		}
	}
}
