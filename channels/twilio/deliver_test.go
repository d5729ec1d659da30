package twilio

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/render"
)

func newSMS(t *testing.T, f *twiliotest.Server, cfg Config, db Store) *SMS {
	t.Helper()
	d, err := NewSMS(cfg, Deps{Client: newTestClient(t, f.URL, 5*time.Second), Store: db, Limiter: fastLimiter()})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newWA(t *testing.T, f *twiliotest.Server, cfg Config, db Store) *WhatsApp {
	t.Helper()
	d, err := NewWhatsApp(cfg, Deps{Client: newTestClient(t, f.URL, 5*time.Second), Store: db, Limiter: fastLimiter()})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSMSDeliverSendsOneMessage(t *testing.T) {
	f := newFakeTwilio(t)
	d := newSMS(t, f, testConfig(), openStore(t))
	res, err := d.Deliver(context.Background(), approvalJob("dlv_1", envelope.ChannelSMS, alice))
	if err != nil {
		t.Fatal(err)
	}
	form := f.LastForm()
	if form.Get("To") != alice || form.Get("From") != ourSMS {
		t.Errorf("To/From = %q/%q", form.Get("To"), form.Get("From"))
	}
	if form.Get("StatusCallback") != "https://beachd.example.org/v1/inbound/twilio" {
		t.Errorf("StatusCallback = %q", form.Get("StatusCallback"))
	}
	body := form.Get("Body")
	for _, want := range []string{"Your flight is ready to book.", "Book BA2043 for 6 people", "Reply YES 4821 or NO 4821"} {
		if !strings.Contains(body, want) {
			t.Errorf("body %q lacks %q", body, want)
		}
	}
	if !strings.HasPrefix(res.ProviderID, "SM") || res.Receipt.Meta["sid"] != res.ProviderID ||
		res.Receipt.Meta["source"] != "twilio" || res.Receipt.Meta["status"] != "queued" {
		t.Errorf("result = %+v", res)
	}
}

func TestMessagingServiceReplacesFrom(t *testing.T) {
	f := newFakeTwilio(t)
	cfg := testConfig()
	cfg.SMSFrom = ""
	cfg.MessagingServiceSID = "MG0123456789abcdef0123456789abcdef"
	d := newSMS(t, f, cfg, openStore(t))
	if _, err := d.Deliver(context.Background(), job("dlv_1", "sms", alice, "hi")); err != nil {
		t.Fatal(err)
	}
	form := f.LastForm()
	if form.Get("From") != "" || form.Get("MessagingServiceSid") != cfg.MessagingServiceSID {
		t.Errorf("form = %v", form)
	}
}

// TestErrorClassification drives the deliverer against Twilio's real error
// shapes and checks how each failure is classified.
func TestErrorClassification(t *testing.T) {
	cases := []struct {
		name      string
		reply     twiliotest.Reply
		permanent bool
		retry     time.Duration
		contains  string
		code      int
	}{
		{"invalid number", twiliotest.Error(400, 21211, "The 'To' number +1555 is not a valid phone number."), true, 0, "21211", 21211},
		{"opted out", twiliotest.Error(400, 21610, "Attempt to send to unsubscribed recipient"), true, 0, "opted out", 21610},
		{"landline", twiliotest.Error(400, 21614, "'To' number is not a valid mobile number"), true, 0, "21614", 21614},
		{"whatsapp window", twiliotest.Error(400, 63016, "Failed to send freeform message because you are outside the allowed window."), true, 0, "63016", 63016},
		{"other 400", twiliotest.Error(400, 21602, "Message body is required."), true, 0, "21602", 21602},
		{"throttled 20429", withHeader(twiliotest.Error(429, 20429, "Too Many Requests"), "Retry-After", "7"), false, 7 * time.Second, "20429", 20429},
		{"whatsapp rate 63017", twiliotest.Error(429, 63017, "Rate limit exceeded"), false, 0, "63017", 63017},
		{"server error", twiliotest.Error(500, 20500, "Internal Server Error"), false, 0, "20500", 20500},
		{"unavailable with retry-after", withHeader(twiliotest.Error(503, 20503, "Service Unavailable"), "Retry-After", "120"), false, 120 * time.Second, "20503", 20503},
		{"bad credentials", twiliotest.Error(401, 20003, "Authenticate"), false, 0, "20003", 20003},
		{"html from a proxy", twiliotest.Reply{Status: 502, Body: "<html><body>Bad Gateway</body></html>", Header: map[string]string{"Content-Type": "text/html"}}, false, 0, "unreadable error body", 0},
		{"html 400", twiliotest.Reply{Status: 400, Body: "<html>nope</html>"}, false, 0, "unreadable error body", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTwilio(t)
			db := openStore(t)
			d := newSMS(t, f, testConfig(), db)
			f.FailNext(tc.reply)
			_, err := d.Deliver(context.Background(), job("dlv_1", "sms", alice, "hi"))
			var e *channels.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *channels.Error", err)
			}
			if e.Permanent != tc.permanent || e.RetryAfter != tc.retry || e.MaybeSent {
				t.Errorf("permanent=%v retryAfter=%v maybeSent=%v, want %v %v false (%v)", e.Permanent, e.RetryAfter, e.MaybeSent, tc.permanent, tc.retry, err)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("err %q lacks %q", err, tc.contains)
			}
			if e.Receipt == nil || e.Receipt.Meta["source"] != "twilio" {
				t.Fatalf("receipt = %+v", e.Receipt)
			}
			if tc.code != 0 && e.Receipt.Meta["errorCode"] != tc.code {
				t.Errorf("receipt errorCode = %v, want %d", e.Receipt.Meta["errorCode"], tc.code)
			}
		})
	}
}

func withHeader(r twiliotest.Reply, k, v string) twiliotest.Reply {
	h := map[string]string{}
	for a, b := range r.Header {
		h[a] = b
	}
	h[k] = v
	r.Header = h
	return r
}

func TestOptOutAtTwilioStopsFurtherSends(t *testing.T) {
	f := newFakeTwilio(t)
	d := newSMS(t, f, testConfig(), openStore(t))
	f.FailNext(twiliotest.Error(400, 21610, "Attempt to send to unsubscribed recipient"))
	if _, err := d.Deliver(context.Background(), job("dlv_1", "sms", alice, "hi")); !errors.Is(err, ErrOptedOut) {
		t.Fatalf("err = %v", err)
	}
	_, err := d.Deliver(context.Background(), job("dlv_2", "sms", alice, "hi again"))
	if !errors.Is(err, ErrOptedOut) || !channels.AsError(err).Permanent {
		t.Fatalf("second send: %v", err)
	}
	if n := f.Posts(); n != 1 {
		t.Errorf("posts = %d, want 1 (no send after opt-out)", n)
	}
	if !strings.Contains(err.Error(), "recipient opted out (STOP)") {
		t.Errorf("reason %q", err)
	}
}

func TestBadNumberIsPermanentWithoutACall(t *testing.T) {
	f := newFakeTwilio(t)
	d := newSMS(t, f, testConfig(), openStore(t))
	for _, to := range []string{"07700900123", "+0123456789", "alice@example.org", "+44 7700 900123", ""} {
		_, err := d.Deliver(context.Background(), job("dlv_1", "sms", to, "hi"))
		if !errors.Is(err, ErrBadNumber) || !channels.AsError(err).Permanent {
			t.Errorf("%q: err = %v", to, err)
		}
	}
	if f.Posts() != 0 {
		t.Error("a bad number reached Twilio")
	}
}

func TestTimeoutAfterPostIsMaybeSentAndRecoveredWithoutResending(t *testing.T) {
	f := newFakeTwilio(t)
	db := openStore(t)
	d, err := NewSMS(testConfig(), Deps{Client: newTestClient(t, f.URL, 300*time.Millisecond), Store: db, Limiter: fastLimiter()})
	if err != nil {
		t.Fatal(err)
	}
	f.FailNext(twiliotest.Reply{Hang: true})
	j := job("dlv_1", "sms", alice, "Your code is ready")
	_, err = d.Deliver(context.Background(), j)
	e := channels.AsError(err)
	if err == nil || !e.MaybeSent || e.Permanent {
		t.Fatalf("err = %v (maybeSent=%v)", err, e.MaybeSent)
	}
	// The fake created the message after the client gave up; wait for it.
	poll.Eventually(t, 5*time.Second, "the fake to create the message", func() bool { return len(f.Created()) == 1 })
	// The dispatcher records MaybeSent; the next attempt looks it up.
	j.Delivery.MaybeSent = true
	j.Attempt = 2
	res, err := d.Deliver(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if f.Posts() != 1 {
		t.Errorf("posts = %d, want 1: the maybe-sent message was sent again", f.Posts())
	}
	sid := f.Created()[0].SID
	if res.ProviderID != sid || res.Receipt.Meta["recovered"] != true {
		t.Errorf("result = %+v, want recovered %v", res, sid)
	}
}

func TestMaybeSentWithRecordedSIDFetchesIt(t *testing.T) {
	f := newFakeTwilio(t)
	d := newSMS(t, f, testConfig(), openStore(t))
	first, err := d.Deliver(context.Background(), job("dlv_1", "sms", alice, "one"))
	if err != nil {
		t.Fatal(err)
	}
	j := job("dlv_1", "sms", alice, "one")
	j.Delivery.MaybeSent, j.Delivery.ProviderID = true, first.ProviderID
	res, err := d.Deliver(context.Background(), j)
	if err != nil || res.ProviderID != first.ProviderID || f.Posts() != 1 {
		t.Fatalf("res=%+v err=%v posts=%d", res, err, f.Posts())
	}
}

func TestMaybeSentButNotAtTwilioSendsAgain(t *testing.T) {
	f := newFakeTwilio(t)
	d := newSMS(t, f, testConfig(), openStore(t))
	// Another message to the same number exists; its body differs.
	if _, err := d.Deliver(context.Background(), job("dlv_0", "sms", alice, "something else")); err != nil {
		t.Fatal(err)
	}
	j := job("dlv_1", "sms", alice, "the real one")
	j.Delivery.MaybeSent = true
	if _, err := d.Deliver(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	if f.Posts() != 2 || f.LastForm().Get("Body") != "the real one" {
		t.Errorf("posts = %d, last body %q", f.Posts(), f.LastForm().Get("Body"))
	}
}

func TestConnectionRefusedIsNotMaybeSent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	d, err := NewSMS(testConfig(), Deps{Client: newTestClient(t, "http://"+addr, time.Second), Store: openStore(t), Limiter: fastLimiter()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Deliver(context.Background(), job("dlv_1", "sms", alice, "hi"))
	e := channels.AsError(err)
	if err == nil || e.MaybeSent || e.Permanent {
		t.Fatalf("err = %v maybeSent=%v", err, e.MaybeSent)
	}
}

func TestWhatsAppWindowAndTemplates(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	approvalTmpl := &render.ContentTemplate{ContentSID: "HXapproval0123456789abcdef012345", Variables: map[string]string{
		"1": "{{(index .Approvals 0).Summary}}",
		"2": "{{(index (index .Approvals 0).Buttons 0).Payload}}",
		"3": "{{(index (index .Approvals 0).Buttons 1).Payload}}"}}
	resultTmpl := &render.ContentTemplate{ContentSID: "HXresult0123456789abcdef01234567", Variables: map[string]string{"1": "{{.Text}}"}}

	t.Run("outside the window without a template", func(t *testing.T) {
		f := newFakeTwilio(t)
		cfg := testConfig()
		cfg.Now = func() time.Time { return now }
		d := newWA(t, f, cfg, openStore(t))
		_, err := d.Deliver(context.Background(), job("dlv_1", "whatsapp", alice, "hi"))
		if !errors.Is(err, ErrOutsideWindow) || !channels.AsError(err).Permanent || f.Posts() != 0 {
			t.Fatalf("err = %v posts=%d", err, f.Posts())
		}
	})
	t.Run("outside the window with a result template", func(t *testing.T) {
		f := newFakeTwilio(t)
		cfg := testConfig()
		cfg.Now = func() time.Time { return now }
		cfg.Templates.Result = resultTmpl
		d := newWA(t, f, cfg, openStore(t))
		if _, err := d.Deliver(context.Background(), job("dlv_1", "whatsapp", alice, "Your trip is booked")); err != nil {
			t.Fatal(err)
		}
		form := f.LastForm()
		var vars map[string]string
		json.Unmarshal([]byte(form.Get("ContentVariables")), &vars)
		if form.Get("To") != "whatsapp:"+alice || form.Get("From") != ourWA || form.Get("ContentSid") != resultTmpl.ContentSID ||
			form.Get("Body") != "" || vars["1"] != "Your trip is booked" {
			t.Errorf("form = %v", form)
		}
	})
	t.Run("inside the window free-form", func(t *testing.T) {
		f := newFakeTwilio(t)
		db := openStore(t)
		cfg := testConfig()
		cfg.Now = func() time.Time { return now }
		cfg.Templates.Result = resultTmpl
		db.PutKV(context.Background(), windowKey(alice), []byte(now.Add(-23*time.Hour).Format(time.RFC3339Nano)))
		d := newWA(t, f, cfg, db)
		if _, err := d.Deliver(context.Background(), job("dlv_1", "whatsapp", alice, "Your trip is booked")); err != nil {
			t.Fatal(err)
		}
		if form := f.LastForm(); form.Get("Body") != "Your trip is booked" || form.Get("ContentSid") != "" {
			t.Errorf("form = %v", form)
		}
	})
	t.Run("window closed after 24 hours", func(t *testing.T) {
		f := newFakeTwilio(t)
		db := openStore(t)
		cfg := testConfig()
		cfg.Now = func() time.Time { return now }
		db.PutKV(context.Background(), windowKey(alice), []byte(now.Add(-24*time.Hour).Format(time.RFC3339Nano)))
		d := newWA(t, f, cfg, db)
		if _, err := d.Deliver(context.Background(), job("dlv_1", "whatsapp", alice, "late")); !errors.Is(err, ErrOutsideWindow) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("approval uses the approval template and its buttons", func(t *testing.T) {
		f := newFakeTwilio(t)
		cfg := testConfig()
		cfg.Now = func() time.Time { return now }
		cfg.Templates.Approval = approvalTmpl
		d := newWA(t, f, cfg, openStore(t))
		if _, err := d.Deliver(context.Background(), approvalJob("dlv_1", "whatsapp", alice)); err != nil {
			t.Fatal(err)
		}
		form := f.LastForm()
		var vars map[string]string
		if err := json.Unmarshal([]byte(form.Get("ContentVariables")), &vars); err != nil {
			t.Fatal(err)
		}
		if form.Get("ContentSid") != approvalTmpl.ContentSID || vars["1"] != "Book BA2043 for 6 people" ||
			vars["2"] != "apr_1:n0nce" || vars["3"] != "apr_1:n0nce2" {
			t.Errorf("form = %v vars = %v", form, vars)
		}
	})
	t.Run("approval inside the window without a template or quick replies falls back to text", func(t *testing.T) {
		f := newFakeTwilio(t)
		db := openStore(t)
		cfg := testConfig()
		cfg.Now = func() time.Time { return now }
		cfg.NoQuickReplies = true
		db.PutKV(context.Background(), windowKey(alice), []byte(now.Add(-time.Hour).Format(time.RFC3339Nano)))
		d := newWA(t, f, cfg, db)
		if _, err := d.Deliver(context.Background(), approvalJob("dlv_1", "whatsapp", alice)); err != nil {
			t.Fatal(err)
		}
		if b := f.LastForm().Get("Body"); !strings.Contains(b, "Reply YES 4821 or NO 4821") {
			t.Errorf("body = %q", b)
		}
	})
}

func TestConfigValidation(t *testing.T) {
	f := newFakeTwilio(t)
	c := newTestClient(t, f.URL, time.Second)
	bad := []Config{
		{SMSFrom: "5550001111"},
		{SMSFrom: ourSMS, Templates: Templates{Result: &render.ContentTemplate{}}},
		{SMSFrom: ourSMS, Templates: Templates{Result: &render.ContentTemplate{ContentSID: "HX1", Variables: map[string]string{"1": "{{.Text"}}}},
	}
	for i, cfg := range bad {
		if _, err := NewSMS(cfg, Deps{Client: c, Store: openStore(t)}); err == nil {
			t.Errorf("config %d accepted", i)
		}
	}
	if _, err := NewWhatsApp(Config{WhatsAppFrom: "+15550002222"}, Deps{Client: c, Store: openStore(t)}); err != nil {
		t.Errorf("whatsapp_from without prefix: %v", err)
	}
	if _, err := NewClient(ClientConfig{AccountSID: testAccount, AuthToken: testToken, APIBaseURL: "ftp://x"}); err == nil {
		t.Error("ftp base URL accepted")
	}
}

func TestBaseURLRewriteKeepsPathPrefix(t *testing.T) {
	f := newFakeTwilio(t)
	// A base URL with a path prefix: the fake is mounted under /edge.
	mux := newPrefixServer(t, "/edge", f)
	d, err := NewSMS(testConfig(), Deps{Client: newTestClient(t, mux+"/edge/", time.Second), Store: openStore(t), Limiter: fastLimiter()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Deliver(context.Background(), job("dlv_1", "sms", alice, "hi")); err != nil {
		t.Fatal(err)
	}
	if f.Posts() != 1 {
		t.Error("not delivered through the prefixed base URL")
	}
}

// TestSplitSMSFailureMidwayDoesNotRepeatSentParts: with the renderer's split
// policy a long text is several messages; when part 2 fails, the retry
// finds part 1 at Twilio and sends only what is missing.
func TestSplitSMSFailureMidwayDoesNotRepeatSentParts(t *testing.T) {
	f := newFakeTwilio(t)
	r, err := render.New(render.Config{SMSPolicy: render.SMSSplit, SMSMaxChars: 160})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewSMS(testConfig(), Deps{Client: newTestClient(t, f.URL, 5*time.Second), Store: openStore(t), Limiter: fastLimiter(), Render: Renderer(r, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 8)
	j := job("dlv_1", "sms", alice, long)
	// Part 1 succeeds, part 2 fails.
	f.FailAfter(1, twiliotest.Error(503, 20503, "Service Unavailable"))
	_, err = d.Deliver(context.Background(), j)
	e := channels.AsError(err)
	if err == nil || !e.MaybeSent || e.Permanent || e.ProviderID == "" {
		t.Fatalf("err = %v maybeSent=%v providerID=%q", err, e.MaybeSent, e.ProviderID)
	}
	// The parts that went out are in the failed attempt's receipt, so that
	// their status callbacks find the delivery whatever happens next.
	if e.Receipt == nil || !slices.Equal(e.Receipt.Meta["parts"].([]string), []string{e.ProviderID}) {
		t.Fatalf("failed attempt's receipt %+v; want parts [%s]", e.Receipt, e.ProviderID)
	}
	j.Delivery.MaybeSent, j.Delivery.ProviderID = true, e.ProviderID
	res, err := d.Deliver(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	parts, _ := res.Receipt.Meta["parts"].([]string)
	if len(parts) < 2 || parts[0] != e.ProviderID {
		t.Fatalf("parts = %v", res.Receipt.Meta["parts"])
	}
	created := f.Created()
	if len(created) != len(parts) {
		t.Errorf("created %d messages for %d parts: a part was sent twice", len(created), len(parts))
	}
	seen := map[string]bool{}
	for _, m := range created {
		b := m.Body
		if seen[b] {
			t.Errorf("part sent twice: %q", b)
		}
		seen[b] = true
	}
}

// TestFailedLookupKeepsMaybeSent: when the lookup of a maybe-sent message
// fails, the attempt's error still says "maybe sent", so the next attempt
// looks again instead of sending blindly.
func TestFailedLookupKeepsMaybeSent(t *testing.T) {
	f := newFakeTwilio(t)
	d := newSMS(t, f, testConfig(), openStore(t))
	j := job("dlv_1", "sms", alice, "hi")
	j.Delivery.MaybeSent, j.Delivery.ProviderID = true, "SM00000000000000000000000000000000"
	// The fetch is answered 500.
	srvDown := twiliotest.Reply{Status: 500, Body: `{"code":20500,"message":"Internal Server Error","status":500}`}
	f.FailGet(srvDown)
	_, err := d.Deliver(context.Background(), j)
	e := channels.AsError(err)
	if err == nil || !e.MaybeSent || e.Permanent || e.ProviderID != j.Delivery.ProviderID {
		t.Fatalf("err = %v maybeSent=%v providerID=%q", err, e.MaybeSent, e.ProviderID)
	}
	if f.Posts() != 0 {
		t.Error("sent although the lookup failed")
	}
}

func TestProviderMessagesAreRedacted(t *testing.T) {
	f := newFakeTwilio(t)
	d := newSMS(t, f, testConfig(), openStore(t))
	f.FailNext(twiliotest.Error(400, 21211, "The 'To' number +447700900123 is not a valid phone number."))
	_, err := d.Deliver(context.Background(), job("dlv_1", "sms", alice, "hi"))
	if err == nil || strings.Contains(err.Error(), "7700900") {
		t.Fatalf("err = %v: the number leaked", err)
	}
}
