package conversations

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
)

// FuzzOurDeliveryID: any Message-ID from outside either names a delivery
// id of our form or nothing; never a panic, never an id with a dot, an @
// or brackets (it becomes a store key).
func FuzzOurDeliveryID(f *testing.F) {
	for _, s := range []string{"<dlv_01h2x3y4z5.tok@beachd.example.org>", "dlv_abc@x", "<dlv_@x>", "<m1@mail>", "", "<dlv_ABC.x@y>", "<<dlv_a@b>>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := ourDeliveryID(s)
		if !ok {
			if id != "" {
				t.Fatalf("%q: id %q without ok", s, id)
			}
			return
		}
		if !strings.HasPrefix(id, "dlv_") || len(id) > 64 || strings.ContainsAny(id, ".@<> ") {
			t.Fatalf("%q gave delivery id %q", s, id)
		}
	})
}

// FuzzNormaliseAndAllow: addresses from outside normalise to bounded
// strings, and the allow list denies by default.
func FuzzNormaliseAndAllow(f *testing.F) {
	f.Add("email", "Ann@Example.org", "*@example.org")
	f.Add("sms", "whatsapp:+44 (7700) 900-001", "+44*")
	f.Add("whatsapp", "", "*")
	f.Fuzz(func(t *testing.T, channel, addr, pattern string) {
		n := normalise(channel, addr)
		if len(n) > 320 {
			t.Fatalf("normalised %d bytes", len(n))
		}
		if allowed(channel, n, nil) {
			t.Fatalf("%q allowed by an empty list", n)
		}
		if checkPattern(pattern) != nil && allowed(channel, n, []string{pattern}) && pattern != "*" {
			// An invalid pattern is refused at New; it may still match
			// here only as an exact address, never as a wildcard.
			if strings.Contains(pattern, "*") && !strings.HasPrefix(pattern, "*@") && !strings.HasSuffix(pattern, "*") {
				t.Fatalf("invalid pattern %q allowed %q", pattern, n)
			}
		}
	})
}

// FuzzOpenAttachment: the id, index, expiry and signature of an attachment
// URL come from outside; nothing but the signed link opens anything.
func FuzzOpenAttachment(f *testing.F) {
	f.Add("inb_x", 0, "99999999999", "sig")
	f.Add("", -1, "", "")
	db, err := bolt.Open(f.TempDir()+"/beachd.db", bolt.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	r, err := New(Config{URLKey: []byte(testKey)}, db, nil, nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id string, n int, expires, sig string) {
		if _, _, _, err := r.OpenAttachment(context.Background(), id, n, expires, sig); err == nil {
			t.Fatalf("opened %q %d %q %q", id, n, expires, sig)
		}
	})
}

// FuzzBoundInbound: whatever a channel hands over, the stored record keeps
// within the bounds and stays valid UTF-8 where the input was.
func FuzzBoundInbound(f *testing.F) {
	f.Add("email", "a@b", "subject", "text", 3)
	f.Fuzz(func(t *testing.T, channel, from, subject, text string, refs int) {
		r := &Router{cfg: Config{Now: time.Now}}
		in := envelope.Inbound{Channel: channel, From: from, Subject: strings.Repeat(subject, 10), Text: strings.Repeat(text, 100)}
		for i := 0; i < refs%200; i++ {
			in.References = append(in.References, "<r@x>")
		}
		out := r.boundInbound(in)
		if len(out.Subject) > maxSubject || len(out.Text) > store.MaxInboundText || len(out.References) > store.MaxMessageIDChain {
			t.Fatalf("bounds exceeded: %d %d %d", len(out.Subject), len(out.Text), len(out.References))
		}
		if utf8.ValidString(in.Text) && !utf8.ValidString(out.Text) {
			t.Fatal("clipping split a character")
		}
	})
}
