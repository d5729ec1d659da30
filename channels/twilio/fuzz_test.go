package twilio

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzInboundHandler feeds arbitrary bodies to the webhook, both signed
// correctly (so the parser and processing run) and unsigned. The handler
// must never panic, must answer one of its documented statuses, must refuse
// everything unsigned, and must answer empty TwiML whenever it says 200.
func FuzzInboundHandler(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.form"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(strings.TrimSpace(string(b)), true)
	}
	f.Add("Body=STOP&From=%2B447700900123&MessageSid=SM1", true)
	f.Add("Body=START&From=whatsapp%3A%2B447700900123&MessageSid=SM2&WaId=447700900123", true)
	f.Add("MessageSid=SM3&MessageStatus=delivered&ErrorCode=30006", true)
	f.Add("MessageSid=SM4&MessageStatus=bogus", true)
	f.Add("a=%zz", false)
	f.Add("", true)
	f.Add(strings.Repeat("x=1&", 2000), true)
	e := newHook(f)
	f.Fuzz(func(t *testing.T, body string, signed bool) {
		sig := "-"
		if signed {
			form, err := url.ParseQuery(body)
			if err != nil {
				sig = "AAAA"
			} else {
				sig = Signature(testToken, hookURL, form)
			}
		}
		before := len(e.dec.all())
		r := httptest.NewRequest(http.MethodPost, "/v1/inbound/twilio", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if sig != "-" {
			r.Header.Set("X-Twilio-Signature", sig)
		}
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		switch w.Code {
		case 200:
			if w.Body.String() != emptyTwiML {
				t.Fatalf("200 without empty TwiML: %q", w.Body.String())
			}
		case 400, 403, 413:
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
		if !signed && (w.Code == 200 || len(e.dec.all()) != before) {
			t.Fatalf("unsigned body acted on: %d", w.Code)
		}
	})
}

// FuzzInboundMedia feeds arbitrary forms to the inbound decoder: it must
// never panic, keep at most maxInboundMedia attachments, keep only media
// URLs on Twilio's API host, and only valid media types (or none).
func FuzzInboundMedia(f *testing.F) {
	f.Add(readTestdata(f, "whatsapp_media.form"))
	f.Add(readTestdata(f, "sms_inbound.form"))
	f.Add("NumMedia=99&MediaUrl0=https%3A%2F%2Fapi.twilio.com%2F2010-04-01%2FAccounts%2FAC1%2FMessages%2FMM1%2FMedia%2FME1&MediaContentType0=image%2Fjpeg")
	f.Add("NumMedia=1&MediaUrl0=https%3A%2F%2Fapi.twilio.com%40evil.example%2F2010-04-01%2FAccounts%2FA%2FMedia%2Fx")
	f.Add("NumMedia=-3&To=whatsapp%3A%2B15550002222&From=whatsapp%3A%2B447700900123")
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		in, notes := parseInbound(form, time.Unix(0, 0))
		if len(in.Attachments) > maxInboundMedia || len(notes) > maxInboundMedia+1 {
			t.Fatalf("%d attachments, %d notes", len(in.Attachments), len(notes))
		}
		for _, a := range in.Attachments {
			u, err := url.Parse(a.URL)
			if err != nil || u.Scheme != "https" || u.Host != TwilioMediaHost || u.User != nil || a.Data != nil {
				t.Fatalf("attachment off Twilio's API host: %+v", a)
			}
			if a.MediaType != "" && !validMediaType(a.MediaType) {
				t.Fatalf("invalid media type %q", a.MediaType)
			}
		}
		for _, r := range in.Recipients {
			if !isE164(r) {
				t.Fatalf("recipient %q is not E.164", r)
			}
		}
		if in.FullText != form.Get("Body") {
			t.Fatalf("full text %q, body %q", in.FullText, form.Get("Body"))
		}
	})
}
