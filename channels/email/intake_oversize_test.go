package email

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestHumanBytesAndTooLargeReason(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 64 << 10: "64 KiB", 1536: "1.5 KiB",
		1 << 20: "1 MiB", 10 << 20: "10 MiB", 40_000_000: "38.1 MiB", 5 << 30: "5120 MiB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
	if got, want := tooLargeReason(40_000_000, 10<<20), "message of 38.1 MiB is over the limit of 10 MiB (email.imap.max_message_bytes)"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
}

func TestSalvageHeader(t *testing.T) {
	cases := []struct {
		name, raw            string
		from, subject, msgID string
	}{
		{"line without a colon", "From: Bob <Bob@Example.com>\r\nMessage-ID: <b1@x>\r\nno colon here\r\nSubject: =?utf-8?q?caf=C3=A9?=\r\n\r\nbody",
			"bob@example.com", "café", "b1@x"},
		{"folded and lower-case names", "message-id:\r\n <f1@x>\r\nsubject: one\r\n\ttwo\r\nfrom: a@example.org\n\nSubject: not this",
			"a@example.org", "one\ttwo", "f1@x"},
		{"first field wins", "Subject: first\r\nSubject: second\r\n", "", "first", ""},
		{"the body is not read", "X: y\r\n\r\nFrom: body@example.com\r\nMessage-ID: <body@x>\r\n", "", "", ""},
		{"nothing", "", "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := unreadableInbound([]byte(c.raw), errors.New("unreadable message header: bad\r\nline"), time.Unix(1, 0))
			if in.From != c.from || in.Subject != c.subject || in.MessageID != c.msgID {
				t.Errorf("from %q subject %q id %q, want %q %q %q", in.From, in.Subject, in.MessageID, c.from, c.subject, c.msgID)
			}
			if in.Channel != "email" || !in.AuthFailed || in.IgnoredBecause != "unreadable: unreadable message header: bad line" {
				t.Errorf("inbound %+v", in)
			}
		})
	}
	// A long parse error is cut.
	in := unreadableInbound(nil, errors.New(strings.Repeat("é", 1000)), time.Time{})
	if len(in.IgnoredBecause) > len("unreadable: ")+maxUnreadableReason+len("…") || !utf8.ValidString(in.IgnoredBecause) {
		t.Errorf("reason of %d bytes", len(in.IgnoredBecause))
	}
	// A long field is cut.
	in = unreadableInbound([]byte("Subject: "+strings.Repeat("s", 3*salvageMaxField)+"\r\n"), errors.New("x"), time.Time{})
	if len(in.Subject) > salvageMaxField {
		t.Errorf("subject of %d bytes", len(in.Subject))
	}
}

// FuzzSalvageHeader: any input yields bounded, valid UTF-8 fields.
func FuzzSalvageHeader(f *testing.F) {
	f.Add([]byte("From: a@b\r\nno colon\r\nMessage-ID: <x@y>\r\n\r\n"))
	f.Add([]byte("subject:\r\n \r\n\t\xff\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := unreadableInbound(raw, errors.New("x"), time.Time{})
		for _, v := range []string{in.From, in.Subject, in.MessageID} {
			if len(v) > salvageMaxField || !utf8.ValidString(v) {
				t.Fatalf("field %q", v)
			}
		}
	})
}
