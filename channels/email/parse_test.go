package email

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	tokA = "abcdefghijklmnopqrstuvwxyz"
	tokB = "zyxwvutsrqponmlkjihgfedcba"
)

func corpusOptions(now time.Time) ParseOptions {
	return ParseOptions{
		ReplyDomain: "reply.beachd.test", ReplyLocal: "approvals", MessageIDDomain: "beachd.test",
		OwnAddresses: []string{"agent@beachd.test"}, AuthServID: "mx.example.com", ReceivedAt: now,
	}
}

// want is the expected reading of one corpus message.
type want struct {
	text     string
	source   string // token source; "" = no token
	ignored  string // IgnoredBecause
	bounce   bool
	auth     string // AuthDetail when AuthFailed
	htmlOnly bool
}

// corpus: real-world reply shapes (testdata/replies/*.eml) and what a
// person reading them would take as the reply.
var corpus = map[string]want{
	"gmail_top_posted":                   {text: "Approve, looks good", source: SourceReplyTo},
	"gmail_wrapped_attribution":          {text: "yes", source: SourceInReplyTo},
	"gmail_html_only":                    {text: "Approve & book the aisle seat\n\nAlice", source: SourceSubject, htmlOnly: true},
	"android_gmail":                      {text: "Ok", source: SourceReplyTo},
	"outlook_desktop":                    {text: "Deny - budget is exhausted for this quarter, please try a cheaper fare.\n\nRegards,\nBob", source: SourceReplyTo},
	"outlook_original_message_cp1252":    {text: "Approved – go ahead.", source: SourceReplyTo},
	"outlook_html_only":                  {text: "Approve\n\nThanks!", source: SourceInReplyTo, htmlOnly: true},
	"outlook_android":                    {text: "Approve", source: SourceReplyTo},
	"iphone_mail":                        {text: "Approve", source: SourceReplyTo},
	"apple_mail_macos":                   {text: "Yes please, but only if the return is flexible.", source: SourceReplyTo},
	"thunderbird_bottom_posted":          {text: "no, not this week", source: SourceReplyTo},
	"plain_bottom_posted_no_attribution": {text: "deny  we already have a train booked", source: SourceSubject},
	"german_gmail":                       {text: "Ja, genehmigt – danke für die schnelle Übersicht.", source: SourceReplyTo},
	"german_outlook_latin1":              {text: "Nein, zu teuer.\n\nMit freundlichen Grüßen\nHans", source: SourceReplyTo},
	"french_gmail":                       {text: "Oui, approuvé.", source: SourceReplyTo},
	"french_iphone":                      {text: "Refusé, trop cher", source: SourceInReplyTo},
	"spanish_gmail_base64":               {text: "Sí, aprobado", source: SourceReplyTo},
	"japanese_iso2022jp":                 {text: "承認します。よろしくお願いします。", source: SourceInReplyTo},
	"dutch_iphone":                       {text: "Akkoord", source: SourceReplyTo},
	"mixed_with_attachment":              {text: "Approve, see the attached seat map.", source: SourceReplyTo},
	"references_only":                    {text: "Approve", source: SourceReferences},
	"unknown_charset_latin1":             {text: "Approuvé, merci", source: SourceReplyTo},
	"ooo_auto_submitted": {text: "I am out of the office until 22 January with limited access to email. Yes, I will reply when back.",
		source: SourceReplyTo, ignored: "auto-submitted: auto-replied"},
	"ooo_exchange_subject_only": {text: "Approved travel requests go to my deputy while I am away.", source: SourceReplyTo, ignored: "out-of-office subject"},
	"ooo_german_x_autoreply":    {text: "Ja, ich bin bis zum 22. Januar nicht im Büro.", source: SourceReplyTo, ignored: "header x-autoreply"},
	"precedence_list":           {text: "yes this is a digest", source: SourceReplyTo, ignored: "precedence: list"},
	"noreply_sender":            {text: "ok", source: SourceReplyTo, ignored: "no-reply sender"},
	"own_address":               {text: "Reply APPROVE or DENY.", source: SourceReplyTo, ignored: "from our own address"},
	"dsn_bounce_multipart_report": {text: "This is the mail system at host mx.example.com.\n\nI'm sorry to have to inform you that your message could not\nbe delivered to one or more recipients.\n\n<nobody@example.com>: host mx.example.com said: 550 5.1.1 User unknown",
		source: SourceReplyTo, ignored: "bounce: multipart/report", bounce: true},
	"forged_from_dmarc_fail":         {text: "Approve", source: SourceReplyTo, auth: "dmarc=fail"},
	"dkim_fail_aligned_fake_results": {text: "Approve", source: SourceReplyTo, auth: "dkim=fail (example.org)"},
	"two_tokens":                     {text: "Approve", ignored: "two different approval tokens"},
	"yahoo_html":                     {text: "No thanks, I will drive.", source: SourceReplyTo, htmlOnly: true},
	"protonmail_html":                {text: "approved", source: SourceReplyTo, htmlOnly: true},
	"auto_submitted_no":              {text: "y", source: SourceReplyTo},
	"interleaved":                    {text: "Approve\n\nYes, that one too.", source: SourceReplyTo},
	"samsung_original_message":       {text: "Deny", source: SourceReplyTo},
}

func TestParseCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/replies/*.eml")
	if err != nil || len(files) < 20 {
		t.Fatalf("corpus: %d files, %v", len(files), err)
	}
	seen := map[string]bool{}
	now := time.Date(2024, 1, 15, 10, 30, 0, 0, time.UTC)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".eml")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			w, ok := corpus[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParseMessage(raw, corpusOptions(now))
			if err != nil {
				t.Fatal(err)
			}
			in := p.Inbound
			if in.Text != w.text {
				t.Errorf("text:\n got %q\nwant %q", in.Text, w.text)
			}
			if in.TokenSource != w.source {
				t.Errorf("token source = %q, want %q", in.TokenSource, w.source)
			}
			if w.source != "" && in.Token != tokA {
				t.Errorf("token = %q", in.Token)
			}
			if in.IgnoredBecause != w.ignored {
				t.Errorf("ignored = %q, want %q", in.IgnoredBecause, w.ignored)
			}
			auto := w.ignored != "" && w.ignored != "two different approval tokens"
			if in.AutoGenerated != auto || in.Bounce != w.bounce {
				t.Errorf("auto=%v bounce=%v, want %v %v", in.AutoGenerated, in.Bounce, auto, w.bounce)
			}
			if in.TokenConflict != (name == "two_tokens") {
				t.Errorf("conflict = %v", in.TokenConflict)
			}
			if w.auth != "" && (!in.AuthFailed || !strings.Contains(in.AuthDetail, w.auth)) {
				t.Errorf("auth = %v %q, want %q", in.AuthFailed, in.AuthDetail, w.auth)
			}
			if p.HTMLOnly != w.htmlOnly {
				t.Errorf("htmlOnly = %v", p.HTMLOnly)
			}
			if in.From == "" || in.MessageID == "" || in.Channel != "email" || !in.ReceivedAt.Equal(now) {
				t.Errorf("from=%q id=%q channel=%q at=%v", in.From, in.MessageID, in.Channel, in.ReceivedAt)
			}
		})
	}
	for name := range corpus {
		if !seen[name] {
			t.Errorf("expectation %s has no file", name)
		}
	}
}

func TestTrimReply(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Approve\n\nOn Mon, Jan 1, 2024 at 9:00 AM X <x@y> wrote:\n> hi", "Approve"},
		{"> quoted\n> more\n\nDeny: too much\n", "Deny: too much"},
		{"yes\n-- \nsig", "yes"},
		{"yes\r\n\r\n-----Original Message-----\r\nFrom: a\r\n", "yes"},
		{"No\n\nFrom: Agent <a@b>\nSent: Monday\nTo: x\n\nold", "No"},
		{"Approve\n\nVon meinem iPhone gesendet", "Approve"},
		{"承認\n\niPhoneから送信", "承認"},
		{"  \n\n", ""},
		{"line one\n\n\n\nline two   ", "line one\n\nline two"},
		// A line that merely starts with "On" is not an attribution.
		{"On second thought, deny.", "On second thought, deny."},
		{"From: me\nI approve", "From: me\nI approve"},
		// No blank line between the answer and the attribution.
		{"Approve\nOn Mon, Jan 1, 2024 at 9:00 AM X <x@y> wrote:\n> hi", "Approve"},
		{"Approve\nbob@example.com wrote:\n> hi", "Approve"},
		{"Travel Agent <a@b> writes:\n\n> q?\n\nyes\n", "yes"},
	} {
		if got := TrimReply(tc.in); got != tc.want {
			t.Errorf("TrimReply(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseBounds(t *testing.T) {
	hdr := "From: a@example.com\r\nSubject: x\r\n"
	t.Run("too large", func(t *testing.T) {
		_, err := ParseMessage(bytes.Repeat([]byte("a"), 2000), ParseOptions{MaxBytes: 1000})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("huge header", func(t *testing.T) {
		raw := hdr + "X-Junk: " + strings.Repeat("a", 300<<10) + "\r\n\r\nyes\r\n"
		if _, err := ParseMessage([]byte(raw), ParseOptions{}); !errors.Is(err, ErrNoHeader) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("deep nesting", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(hdr)
		depth := 200
		for i := 0; i < depth; i++ {
			fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n--b%d\r\n", i, i)
		}
		b.WriteString("Content-Type: text/plain\r\n\r\ndeep yes\r\n")
		for i := depth - 1; i >= 0; i-- {
			fmt.Fprintf(&b, "--b%d--\r\n", i)
		}
		p, err := ParseMessage([]byte(b.String()), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Inbound.Text != "" || len(p.Warnings) == 0 {
			t.Fatalf("text %q warnings %v: nesting limit not applied", p.Inbound.Text, p.Warnings)
		}
	})
	t.Run("many parts", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(hdr + "Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n")
		for i := 0; i < 500; i++ {
			b.WriteString("--b\r\nContent-Type: application/octet-stream\r\n\r\nx\r\n")
		}
		b.WriteString("--b\r\nContent-Type: text/plain\r\n\r\nlate\r\n--b--\r\n")
		p, err := ParseMessage([]byte(b.String()), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Inbound.Text != "" {
			t.Fatalf("read past the part limit: %q", p.Inbound.Text)
		}
	})
	t.Run("base64 bomb", func(t *testing.T) {
		// 8 MiB of base64 text decoding to 6 MiB: only MaxTextBytes of it
		// are kept.
		line := strings.Repeat("QUFB", 19) + "\r\n"
		raw := hdr + "Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n" + strings.Repeat(line, (8<<20)/len(line))
		p, err := ParseMessage([]byte(raw), ParseOptions{MaxTextBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Inbound.Text) > 64<<10 || len(p.Warnings) == 0 {
			t.Fatalf("text %d bytes, warnings %v", len(p.Inbound.Text), p.Warnings)
		}
	})
	t.Run("no header", func(t *testing.T) {
		p, err := ParseMessage([]byte("just text, no header\r\n"), ParseOptions{})
		if err == nil && p.Inbound.From != "" {
			t.Fatalf("invented a sender: %+v", p.Inbound)
		}
	})
}

func FuzzParseMessage(f *testing.F) {
	files, _ := filepath.Glob("testdata/replies/*.eml")
	for _, fn := range files {
		if b, err := os.ReadFile(fn); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("From: a@b\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: multipart/alternative; boundary=y\r\n\r\n--y\r\n\r\nhi\r\n--x--"))
	f.Add([]byte("Subject: =?x-bogus?Q?=FF?=\r\nContent-Type: text/html; charset=utf-16\r\n\r\n<blockquote><div id=appendonsend>"))
	opts := corpusOptions(time.Time{})
	opts.MaxBytes = 1 << 20
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParseMessage(raw, opts)
		if err != nil {
			return
		}
		in := p.Inbound
		if in.Token != "" && !IsToken(in.Token) {
			t.Fatalf("token %q has the wrong shape", in.Token)
		}
		if in.TokenConflict && in.Token != "" {
			t.Fatal("conflict with a token")
		}
		if len(in.Text) > len(raw)*4+64 && len(in.Text) > DefaultMaxTextBytes {
			t.Fatalf("text grew to %d bytes from %d", len(in.Text), len(raw))
		}
	})
}
