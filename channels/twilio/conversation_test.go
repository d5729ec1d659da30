package twilio

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

const (
	agentSMS      = "+15550003333"
	agentWA       = "+15550004444"
	windowContent = "HXaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
)

func convConfig() Config {
	cfg := testConfig()
	cfg.SMSNumbers = []string{agentSMS}
	cfg.WhatsAppNumbers = []string{"whatsapp:" + agentWA}
	return cfg
}

func withExtra(j *channels.Job, kv ...string) *channels.Job {
	j.Delivery.Extra = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		j.Delivery.Extra[kv[i]] = kv[i+1]
	}
	return j
}

// openWindow records that number wrote an hour ago: to any of ours, or
// to each of the given numbers of ours.
func openWindow(t *testing.T, db Store, number string, ours ...string) {
	t.Helper()
	stamp := []byte(time.Now().Add(-time.Hour).Format(time.RFC3339Nano))
	if err := db.PutKV(context.Background(), windowKey(number), stamp); err != nil {
		t.Fatal(err)
	}
	for _, o := range ours {
		if err := db.PutKV(context.Background(), pairWindowKey(o, number), stamp); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExtraFromPicksTheSendingNumber(t *testing.T) {
	ctx := context.Background()
	t.Run("sms from a configured number", func(t *testing.T) {
		f := newFakeTwilio(t)
		d := newSMS(t, f, convConfig(), openStore(t))
		if _, err := d.Deliver(ctx, withExtra(job("dlv_1", "sms", alice, "hi"), envelope.ExtraFrom, agentSMS)); err != nil {
			t.Fatal(err)
		}
		if got := f.LastForm().Get("From"); got != agentSMS {
			t.Errorf("From = %q, want %q", got, agentSMS)
		}
		// Without the extra: the configured sender, as before.
		if _, err := d.Deliver(ctx, job("dlv_2", "sms", alice, "hi")); err != nil {
			t.Fatal(err)
		}
		if got := f.LastForm().Get("From"); got != ourSMS {
			t.Errorf("From = %q, want %q", got, ourSMS)
		}
	})
	t.Run("whatsapp, with or without the prefix", func(t *testing.T) {
		f := newFakeTwilio(t)
		db := openStore(t)
		openWindow(t, db, alice, agentWA, "+15550002222")
		d := newWA(t, f, convConfig(), db)
		for i, from := range []string{agentWA, "whatsapp:" + agentWA, "+15550002222"} {
			if _, err := d.Deliver(ctx, withExtra(job("dlv_w"+string(rune('0'+i)), "whatsapp", alice, "hi"), envelope.ExtraFrom, from)); err != nil {
				t.Fatal(err)
			}
			want := "whatsapp:" + strings.TrimPrefix(from, "whatsapp:")
			if got := f.LastForm().Get("From"); got != want {
				t.Errorf("From = %q, want %q", got, want)
			}
		}
	})
	t.Run("a number that is not ours is a permanent error naming it", func(t *testing.T) {
		f := newFakeTwilio(t)
		d := newSMS(t, f, convConfig(), openStore(t))
		for _, from := range []string{"+15559999999", agentWA, "not a number"} {
			_, err := d.Deliver(ctx, withExtra(job("dlv_x", "sms", alice, "hi"), envelope.ExtraFrom, from))
			e := channels.AsError(err)
			if err == nil || !e.Permanent || !errors.Is(err, ErrUnknownSender) || !strings.Contains(err.Error(), from) {
				t.Errorf("%s: err = %v (permanent %v)", from, err, e.Permanent)
			}
		}
		if f.Posts() != 0 {
			t.Errorf("%d messages sent from a number that is not ours", f.Posts())
		}
	})
	t.Run("a messaging service yields to the named number", func(t *testing.T) {
		f := newFakeTwilio(t)
		cfg := convConfig()
		cfg.SMSFrom, cfg.MessagingServiceSID = "", "MG0123456789abcdef0123456789abcdef"
		d := newSMS(t, f, cfg, openStore(t))
		if _, err := d.Deliver(ctx, withExtra(job("dlv_1", "sms", alice, "hi"), envelope.ExtraFrom, agentSMS)); err != nil {
			t.Fatal(err)
		}
		if form := f.LastForm(); form.Get("From") != agentSMS || form.Get("MessagingServiceSid") != "" {
			t.Errorf("form = %v", form)
		}
	})
	t.Run("a maybe-sent attempt is looked up under the named number", func(t *testing.T) {
		f := newFakeTwilio(t)
		d := newSMS(t, f, convConfig(), openStore(t))
		j := withExtra(job("dlv_1", "sms", alice, "the answer"), envelope.ExtraFrom, agentSMS)
		f.FailNext(twiliotest.Reply{Hang: true})
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := d.Deliver(cctx, j)
		cancel()
		if e := channels.AsError(err); err == nil || !e.MaybeSent {
			t.Fatalf("err = %v", err)
		}
		// The hung request reaches the fake's record of messages only when
		// the client has given up on it: wait for it, as Twilio would
		// have it by the time a retry looks.
		poll.Eventually(t, 5*time.Second, "the hung message recorded", func() bool { return len(f.Created()) == 1 })
		j.Delivery.MaybeSent = true
		res, err := d.Deliver(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		if res.Receipt.Meta["recovered"] != true || f.Posts() != 1 {
			t.Errorf("sent again: recovered %v, %d posts", res.Receipt.Meta["recovered"], f.Posts())
		}
	})
}

func TestWindowTemplate(t *testing.T) {
	ctx := context.Background()
	t.Run("sent when asked, window closed", func(t *testing.T) {
		f := newFakeTwilio(t)
		cfg := convConfig()
		cfg.WindowTemplate = windowContent
		d := newWA(t, f, cfg, openStore(t)) // no window recorded: closed
		j := withExtra(job("dlv_1", "whatsapp", alice, "the held answer"), envelope.ExtraTemplate, "window", envelope.ExtraFrom, agentWA)
		res, err := d.Deliver(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		form := f.LastForm()
		if form.Get("ContentSid") != windowContent || form.Get("Body") != "" || form.Get("From") != "whatsapp:"+agentWA || !strings.HasPrefix(res.ProviderID, "SM") {
			t.Errorf("form = %v", form)
		}
	})
	t.Run("without one configured: a permanent error saying what to set", func(t *testing.T) {
		f := newFakeTwilio(t)
		d := newWA(t, f, convConfig(), openStore(t))
		_, err := d.Deliver(ctx, withExtra(job("dlv_1", "whatsapp", alice, "x"), envelope.ExtraTemplate, "window"))
		if !errors.Is(err, ErrNoWindowTemplate) || !channels.AsError(err).Permanent || !strings.Contains(err.Error(), "window_template") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("other templates and channels are refused", func(t *testing.T) {
		f := newFakeTwilio(t)
		cfg := convConfig()
		cfg.WindowTemplate = windowContent
		wa, sms := newWA(t, f, cfg, openStore(t)), newSMS(t, f, cfg, openStore(t))
		if _, err := wa.Deliver(ctx, withExtra(job("dlv_1", "whatsapp", alice, "x"), envelope.ExtraTemplate, "other")); !errors.Is(err, ErrUnknownTemplate) || !channels.AsError(err).Permanent {
			t.Errorf("whatsapp other: %v", err)
		}
		if _, err := sms.Deliver(ctx, withExtra(job("dlv_2", "sms", alice, "x"), envelope.ExtraTemplate, "window")); !errors.Is(err, ErrUnknownTemplate) || !channels.AsError(err).Permanent {
			t.Errorf("sms window: %v", err)
		}
		if f.Posts() != 0 {
			t.Errorf("%d sent", f.Posts())
		}
	})
	t.Run("config", func(t *testing.T) {
		cfg := convConfig()
		cfg.WindowTemplate = "window"
		if _, err := NewWhatsApp(cfg, Deps{Client: newTestClient(t, "http://127.0.0.1:1", time.Second), Store: openStore(t)}); err == nil || !strings.Contains(err.Error(), "window_template") {
			t.Errorf("err = %v", err)
		}
		cfg = convConfig()
		cfg.SMSNumbers = []string{"5550003333"}
		if _, err := NewSMS(cfg, Deps{Client: newTestClient(t, "http://127.0.0.1:1", time.Second), Store: openStore(t)}); err == nil {
			t.Error("a number that is not E.164 accepted")
		}
	})
}

func TestOutsideTheWindowIsPermanent(t *testing.T) {
	f := newFakeTwilio(t)
	db := openStore(t)
	openWindow(t, db, alice) // we think it is open; Twilio knows better
	d := newWA(t, f, convConfig(), db)
	f.FailNext(twiliotest.Error(400, 63016, "Failed to send freeform message because you are outside the allowed window."))
	_, err := d.Deliver(context.Background(), job("dlv_1", "whatsapp", alice, "late"))
	e := channels.AsError(err)
	if err == nil || !e.Permanent || e.MaybeSent || !strings.Contains(err.Error(), "63016") {
		t.Fatalf("err = %v (permanent %v)", err, e.Permanent)
	}
}

func TestApprovalQuickReplyContent(t *testing.T) {
	ctx := context.Background()
	t.Run("created once, kept, reused", func(t *testing.T) {
		f := newFakeTwilio(t)
		db := openStore(t)
		openWindow(t, db, alice)
		d := newWA(t, f, convConfig(), db)
		var sid string
		for i, id := range []string{"dlv_1", "dlv_2"} {
			if _, err := d.Deliver(ctx, approvalJob(id, "whatsapp", alice)); err != nil {
				t.Fatal(err)
			}
			form := f.LastForm()
			var vars map[string]string
			if err := json.Unmarshal([]byte(form.Get("ContentVariables")), &vars); err != nil {
				t.Fatalf("variables %q: %v", form.Get("ContentVariables"), err)
			}
			if i == 0 {
				sid = form.Get("ContentSid")
			}
			if !contentSID.MatchString(sid) || form.Get("ContentSid") != sid || form.Get("Body") != "" ||
				vars["2"] != "apr_1:n0nce" || vars["3"] != "apr_1:n0nce2" || !strings.Contains(vars["1"], "Book BA2043 for 6 people") {
				t.Errorf("message %d: form %v vars %v", i, form, vars)
			}
		}
		cs := f.Contents()
		if len(cs) != 1 || cs[0].SID != sid {
			t.Fatalf("contents created: %+v", cs)
		}
		var req struct {
			Types map[string]struct {
				Body    string
				Actions []struct{ Title, ID string }
			}
		}
		json.Unmarshal(cs[0].Body, &req)
		qr := req.Types["twilio/quick-reply"]
		if qr.Body != "{{1}}" || len(qr.Actions) != 2 || qr.Actions[0].Title != "Approve" || qr.Actions[0].ID != "{{2}}" ||
			qr.Actions[1].Title != "Deny" || qr.Actions[1].ID != "{{3}}" {
			t.Errorf("content request = %s", cs[0].Body)
		}
		// A new deliverer (a restart) reads the SID from the store.
		d2 := newWA(t, f, convConfig(), db)
		if _, err := d2.Deliver(ctx, approvalJob("dlv_3", "whatsapp", alice)); err != nil {
			t.Fatal(err)
		}
		if len(f.Contents()) != 1 || f.LastForm().Get("ContentSid") != sid {
			t.Errorf("after a restart: %d contents, sid %q", len(f.Contents()), f.LastForm().Get("ContentSid"))
		}
	})
	t.Run("creation fails: text with a code, and no retry for a while", func(t *testing.T) {
		f := newFakeTwilio(t)
		db := openStore(t)
		openWindow(t, db, alice)
		d := newWA(t, f, convConfig(), db)
		f.FailContent(twiliotest.Error(400, 20001, "Invalid content"))
		for _, id := range []string{"dlv_1", "dlv_2"} {
			if _, err := d.Deliver(ctx, approvalJob(id, "whatsapp", alice)); err != nil {
				t.Fatal(err)
			}
			form := f.LastForm()
			if form.Get("ContentSid") != "" || !strings.Contains(form.Get("Body"), "Reply YES 4821 or NO 4821") {
				t.Errorf("form = %v", form)
			}
		}
		if n := len(f.Contents()); n != 0 {
			t.Errorf("%d contents", n)
		}
	})
	t.Run("turned off", func(t *testing.T) {
		f := newFakeTwilio(t)
		db := openStore(t)
		openWindow(t, db, alice)
		cfg := convConfig()
		cfg.NoQuickReplies = true
		d := newWA(t, f, cfg, db)
		if _, err := d.Deliver(ctx, approvalJob("dlv_1", "whatsapp", alice)); err != nil {
			t.Fatal(err)
		}
		if len(f.Contents()) != 0 || !strings.Contains(f.LastForm().Get("Body"), "Reply YES 4821") {
			t.Errorf("contents %d, form %v", len(f.Contents()), f.LastForm())
		}
	})
	t.Run("not for an answer without approvals, nor on SMS", func(t *testing.T) {
		f := newFakeTwilio(t)
		db := openStore(t)
		openWindow(t, db, alice)
		wa, sms := newWA(t, f, convConfig(), db), newSMS(t, f, convConfig(), db)
		if _, err := wa.Deliver(ctx, job("dlv_1", "whatsapp", alice, "hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := sms.Deliver(ctx, approvalJob("dlv_2", "sms", alice)); err != nil {
			t.Fatal(err)
		}
		if len(f.Contents()) != 0 {
			t.Errorf("%d contents", len(f.Contents()))
		}
	})
}

func TestQuickReplyMessageRefusedFallsBackToText(t *testing.T) {
	f := newFakeTwilio(t)
	db := openStore(t)
	openWindow(t, db, alice)
	d := newWA(t, f, convConfig(), db)
	f.FailNext(twiliotest.Error(400, 21656, "The ContentVariables Parameter is invalid."))
	if _, err := d.Deliver(context.Background(), approvalJob("dlv_1", "whatsapp", alice)); err != nil {
		t.Fatal(err)
	}
	if f.Posts() != 2 || f.LastForm().Get("ContentSid") != "" || !strings.Contains(f.LastForm().Get("Body"), "Reply YES 4821 or NO 4821") {
		t.Errorf("%d posts, last form %v", f.Posts(), f.LastForm())
	}
	// A refusal that text cannot outlive is not sent twice.
	f.FailNext(twiliotest.Error(400, 21610, "Attempt to send to unsubscribed recipient"))
	_, err := d.Deliver(context.Background(), approvalJob("dlv_2", "whatsapp", alice))
	if !errors.Is(err, ErrOptedOut) || f.Posts() != 3 {
		t.Errorf("err %v, %d posts", err, f.Posts())
	}
}

func TestInboundMediaOnlyMessageReachesTheDecider(t *testing.T) {
	e := newHook(t)
	body := "MessageSid=MM1&SmsSid=MM1&SmsStatus=received&NumMedia=1&From=%2B447700900123&To=%2B15550001111&Body=" +
		"&MediaContentType0=image%2Fjpeg&MediaUrl0=https%3A%2F%2Fapi.twilio.com%2F2010-04-01%2FAccounts%2F" + testAccount + "%2FMessages%2FMM1%2FMedia%2FME1"
	if w := e.post(body, ""); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	got := e.dec.all()
	if len(got) != 1 || len(got[0].Attachments) != 1 || got[0].Attachments[0].MediaType != "image/jpeg" {
		t.Fatalf("decider got %+v", got)
	}
}

// hostRecorder records the host of each request and answers none.
type hostRecorder struct {
	mu    sync.Mutex
	hosts []string
}

func (h *hostRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, r.URL.Scheme+"://"+r.URL.Host)
	h.mu.Unlock()
	return nil, errors.New("recorded, not sent")
}

func TestContentAPIBaseURL(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		api, content      string
		wantAPI, wantCont string
	}{
		{"", "", "https://api.twilio.com", "https://content.twilio.com"},
		{"http://127.0.0.1:9", "", "http://127.0.0.1:9", "http://127.0.0.1:9"},
		{"http://127.0.0.1:9", "http://127.0.0.1:8", "http://127.0.0.1:9", "http://127.0.0.1:8"},
	} {
		rec := &hostRecorder{}
		c, err := NewClient(ClientConfig{AccountSID: testAccount, AuthToken: testToken, APIBaseURL: tc.api, ContentBaseURL: tc.content, Transport: rec})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := quickContent([]render.Button{{Title: "Approve"}})
		c.CreateContent(ctx, req)
		c.FetchMessage(ctx, "SM1")
		if len(rec.hosts) != 2 || rec.hosts[0] != tc.wantCont || rec.hosts[1] != tc.wantAPI {
			t.Errorf("api %q content %q: hosts %q", tc.api, tc.content, rec.hosts)
		}
	}
	if _, err := NewClient(ClientConfig{AccountSID: testAccount, AuthToken: testToken, ContentBaseURL: "content.twilio.com"}); err == nil {
		t.Error("a relative content base URL accepted")
	}
}

// TestWindowPerNumberOfOurs: WhatsApp opens the window between a person
// and the one number they wrote to; an answer from another of our numbers
// is outside it.
func TestWindowPerNumberOfOurs(t *testing.T) {
	e := newHook(t)
	body := "MessageSid=SMw1&From=whatsapp%3A%2B447700900123&To=whatsapp%3A%2B15550004444&Body=hello"
	if w := e.post(body, ""); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	f := newFakeTwilio(t)
	cfg := convConfig()
	cfg.Now = func() time.Time { return e.now.Add(time.Hour) }
	d := newWA(t, f, cfg, e.db)
	ctx := context.Background()
	if _, err := d.Deliver(ctx, withExtra(job("dlv_1", "whatsapp", alice, "hi"), envelope.ExtraFrom, agentWA)); err != nil {
		t.Fatalf("from the number written to: %v", err)
	}
	if _, err := d.Deliver(ctx, withExtra(job("dlv_2", "whatsapp", alice, "hi"), envelope.ExtraFrom, "+15550002222")); !errors.Is(err, ErrOutsideWindow) {
		t.Fatalf("from another number of ours: %v", err)
	}
	if _, err := d.Deliver(ctx, job("dlv_3", "whatsapp", alice, "hi")); err != nil {
		t.Fatalf("without a named number (any of ours): %v", err)
	}
	if f.Posts() != 2 {
		t.Errorf("%d posts", f.Posts())
	}
}
