package email

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
)

// conversationMail is a new mail to an agent with a PDF, an inline image
// with a file name, an inline image without one (layout, not a file), a
// Delivered-To and an X-Original-To, and a quoted part.
func conversationMail(to string) string {
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 itinerary"))
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG seat map"))
	return "From: Alice <Alice@Example.com>\r\n" +
		"To: Travel <" + to + ">, Bob <bob@example.com>\r\n" +
		"Cc: carol@example.com, BOB@example.com\r\n" +
		"Delivered-To: travel@agents.example.org\r\n" +
		"X-Original-To: Travel@Agents.Example.org\r\n" +
		"Subject: Flights to Lisbon\r\n" +
		"Message-ID: <m1@mail.example.com>\r\n" +
		"Content-Type: multipart/mixed; boundary=\"mix\"\r\n\r\n" +
		"--mix\r\nContent-Type: multipart/related; boundary=\"rel\"\r\n\r\n" +
		"--rel\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		"Please find flights for these dates.\r\n\r\nOn Mon, Bob wrote:\r\n> the old plan\r\n" +
		"--rel\r\nContent-Type: image/png\r\nContent-ID: <logo@x>\r\nContent-Disposition: inline\r\nContent-Transfer-Encoding: base64\r\n\r\n" + png + "\r\n" +
		"--rel\r\nContent-Type: image/png; name=\"seat map.png\"\r\nContent-Disposition: inline; filename=\"seat map.png\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" + png + "\r\n" +
		"--rel--\r\n" +
		"--mix\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"../../itinerary.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" + pdf + "\r\n" +
		"--mix--\r\n"
}

func TestParseRecipientsFullTextAttachments(t *testing.T) {
	p, err := ParseMessage([]byte(conversationMail("travel@agents.example.org")), corpusOptions(testNow))
	if err != nil {
		t.Fatal(err)
	}
	in := p.Inbound
	wantRcpt := []string{"travel@agents.example.org", "bob@example.com", "carol@example.com"}
	if strings.Join(in.Recipients, ",") != strings.Join(wantRcpt, ",") {
		t.Errorf("recipients %q, want %q", in.Recipients, wantRcpt)
	}
	if !strings.Contains(in.FullText, "> the old plan") || !strings.Contains(in.FullText, "Please find flights") {
		t.Errorf("full text %q is not the untrimmed text", in.FullText)
	}
	if !strings.HasPrefix(in.Text, "Please find flights for these dates.") || strings.Contains(in.Text, "the old plan") {
		t.Errorf("text %q", in.Text)
	}
	if len(in.Attachments) != 2 {
		t.Fatalf("attachments %+v", in.Attachments)
	}
	seat, pdf := in.Attachments[0], in.Attachments[1]
	if seat.Filename != "seat map.png" || seat.MediaType != "image/png" || string(seat.Data) != "\x89PNG seat map" || seat.Size != int64(len(seat.Data)) {
		t.Errorf("inline image %+v", seat)
	}
	if pdf.Filename != "itinerary.pdf" || pdf.MediaType != "application/pdf" || string(pdf.Data) != "%PDF-1.4 itinerary" || pdf.Size != 18 {
		t.Errorf("pdf %+v", pdf)
	}
	if in.Conversation != "" || len(p.Warnings) != 0 {
		t.Errorf("conversation %q warnings %v", in.Conversation, p.Warnings)
	}
}

func TestParseConversationAddress(t *testing.T) {
	ra, err := ReplyAddress(convKey, "travel@agents.example.org", cnvA)
	if err != nil {
		t.Fatal(err)
	}
	opts := corpusOptions(testNow)
	opts.ConversationKey = convKey
	p, err := ParseMessage([]byte(conversationMail(ra)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if p.Inbound.Conversation != cnvA || p.Inbound.Token != "" || p.Inbound.TokenConflict {
		t.Fatalf("conversation %q token %q conflict %v", p.Inbound.Conversation, p.Inbound.Token, p.Inbound.TokenConflict)
	}
	// Without the key, or with another, the address names nothing.
	for _, key := range [][]byte{nil, []byte("another key")} {
		opts.ConversationKey = key
		if p, _ := ParseMessage([]byte(conversationMail(ra)), opts); p.Inbound.Conversation != "" {
			t.Errorf("key %q: conversation %q", key, p.Inbound.Conversation)
		}
	}
	// A conversation address at the approvals reply domain is not an
	// approval token, and a token address names no conversation.
	opts.ConversationKey = convKey
	atReply, err := ReplyAddress(convKey, "approvals@reply.beachd.test", cnvA)
	if err != nil {
		t.Fatal(err)
	}
	p, _ = ParseMessage([]byte(conversationMail(atReply)), opts)
	if p.Inbound.Conversation != cnvA || p.Inbound.Token != "" || p.Inbound.IgnoredBecause != "" {
		t.Errorf("conversation address at the reply domain: %+v", p.Inbound)
	}
	p, _ = ParseMessage([]byte(conversationMail("approvals+"+tokA+"@reply.beachd.test")), opts)
	if p.Inbound.Conversation != "" || p.Inbound.Token != tokA || p.Inbound.TokenSource != SourceReplyTo {
		t.Errorf("token address: conversation %q token %q", p.Inbound.Conversation, p.Inbound.Token)
	}
	// Both at once: the token is found (approvals come first) and so is
	// the conversation; neither hides the other.
	p, _ = ParseMessage([]byte(conversationMail(ra+">, <approvals+"+tokA+"@reply.beachd.test")), opts)
	if p.Inbound.Conversation != cnvA || p.Inbound.Token != tokA {
		t.Errorf("both: conversation %q token %q", p.Inbound.Conversation, p.Inbound.Token)
	}
	// Two conversations: neither.
	rb, _ := ReplyAddress(convKey, "travel@agents.example.org", "cnv_other")
	p, _ = ParseMessage([]byte(conversationMail(ra+">, <"+rb)), opts)
	if p.Inbound.Conversation != "" || len(p.Warnings) == 0 {
		t.Errorf("two conversations: %q %v", p.Inbound.Conversation, p.Warnings)
	}
}

func TestParseRecipientBound(t *testing.T) {
	var to []string
	for i := range 80 {
		to = append(to, fmt.Sprintf("p%d@example.com", i))
	}
	raw := "From: a@example.com\r\nTo: " + strings.Join(to, ", ") + "\r\nCc: P1@example.com\r\nSubject: x\r\n\r\nhi\r\n"
	p, err := ParseMessage([]byte(raw), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Inbound.Recipients) != MaxRecipients || p.Inbound.Recipients[49] != "p49@example.com" || len(p.Warnings) == 0 {
		t.Fatalf("%d recipients, last %q, warnings %v", len(p.Inbound.Recipients), p.Inbound.Recipients[len(p.Inbound.Recipients)-1], p.Warnings)
	}
}

func TestParseFullTextBoundAndHTML(t *testing.T) {
	long := strings.Repeat("é", 40<<10) // 80 KiB of two-byte runes
	p, err := ParseMessage([]byte("From: a@example.com\r\nSubject: x\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"+long), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Inbound.FullText); n > MaxFullTextBytes || n < MaxFullTextBytes-1 || !utf8.ValidString(p.Inbound.FullText) {
		t.Errorf("full text %d bytes, valid %v", n, utf8.ValidString(p.Inbound.FullText))
	}
	html := "From: a@example.com\r\nSubject: x\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" +
		"<html><body><p>Book the <b>aisle</b> seat</p><blockquote>On Monday you wrote: old</blockquote></body></html>"
	p, err = ParseMessage([]byte(html), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Inbound.FullText, "Book the aisle seat") || strings.Contains(p.Inbound.FullText, "<b>") {
		t.Errorf("html full text %q", p.Inbound.FullText)
	}
}

// attachMail is a message with n attachments of size bytes each.
func attachMail(n, size int, name func(i int) string, mt string) string {
	var b strings.Builder
	b.WriteString("From: a@example.com\r\nTo: travel@example.org\r\nSubject: files\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n")
	b.WriteString("--b\r\nContent-Type: text/plain\r\n\r\nhere\r\n")
	for i := range n {
		fmt.Fprintf(&b, "--b\r\nContent-Type: %s\r\nContent-Disposition: attachment; filename=\"%s\"\r\nContent-Transfer-Encoding: base64\r\n\r\n%s\r\n",
			mt, name(i), base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{byte('a' + i%26)}, size)))
	}
	b.WriteString("--b--\r\n")
	return b.String()
}

func TestParseAttachmentBounds(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		raw := attachMail(25, 10, func(i int) string { return fmt.Sprintf("f%d.txt", i) }, "text/plain")
		p, err := ParseMessage([]byte(raw), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Inbound.Attachments) != DefaultMaxAttachments || !strings.Contains(strings.Join(p.Warnings, "|"), "5 attachments over the limit") {
			t.Fatalf("%d attachments, warnings %v", len(p.Inbound.Attachments), p.Warnings)
		}
		if p.Inbound.Text != "here" {
			t.Errorf("text %q", p.Inbound.Text)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		raw := attachMail(3, 1000, func(i int) string { return fmt.Sprintf("f%d.bin", i) }, "application/octet-stream")
		p, err := ParseMessage([]byte(raw), ParseOptions{MaxAttachmentBytes: 2500})
		if err != nil {
			t.Fatal(err)
		}
		a := p.Inbound.Attachments
		if len(a) != 3 || len(a[0].Data) != 1000 || len(a[1].Data) != 1000 || a[2].Data != nil || a[2].Size != 1000 {
			t.Fatalf("attachments %+v", a)
		}
		if !strings.Contains(strings.Join(p.Warnings, "|"), `attachment "f2.bin" (1000 bytes) not kept`) {
			t.Errorf("warnings %v", p.Warnings)
		}
	})
	t.Run("default budget", func(t *testing.T) {
		// 9 MiB each: the third is over 25 MiB in all.
		raw := attachMail(3, 9<<20, func(i int) string { return fmt.Sprintf("big%d.bin", i) }, "application/octet-stream")
		p, err := ParseMessage([]byte(raw), ParseOptions{MaxBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		a := p.Inbound.Attachments
		if len(a) != 3 || a[0].Data == nil || a[1].Data == nil || a[2].Data != nil || a[2].Size != 9<<20 {
			t.Fatalf("sizes %d %d %d, kept %v %v %v", a[0].Size, a[1].Size, a[2].Size, a[0].Data != nil, a[1].Data != nil, a[2].Data != nil)
		}
	})
	t.Run("names and types", func(t *testing.T) {
		names := []string{"..\\..\\boot.ini", "invoice\u202egpj.exe", "a\x01b.txt", "/", " . ", strings.Repeat("x", 300) + ".pdf", "=?utf-8?q?R=C3=A9sum=C3=A9.pdf?="}
		raw := attachMail(len(names), 3, func(i int) string { return names[i] }, "text/html\r\n X-Bad: 1")
		p, err := ParseMessage([]byte(raw), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"boot.ini", "invoice_gpj.exe", "a_b.txt", "attachment-4", "attachment-5", strings.Repeat("x", 96) + ".pdf", "Résumé.pdf"}
		if len(p.Inbound.Attachments) != len(want) {
			t.Fatalf("attachments %+v", p.Inbound.Attachments)
		}
		for i, a := range p.Inbound.Attachments {
			if a.Filename != want[i] {
				t.Errorf("name %q became %q, want %q", names[i], a.Filename, want[i])
			}
			if a.MediaType != "text/html" && a.MediaType != "application/octet-stream" {
				t.Errorf("media type %q", a.MediaType)
			}
		}
		raw = attachMail(1, 3, func(int) string { return "x" }, "not a type")
		p, _ = ParseMessage([]byte(raw), ParseOptions{})
		if got := p.Inbound.Attachments[0].MediaType; got != "application/octet-stream" {
			t.Errorf("bad type became %q", got)
		}
	})
}

// TestParseBrokenMIME: a tree cut short, a part with broken base64 and a
// multipart without its boundary still give their text, what could be
// read of the attachments, and a warning; never an error or a panic.
func TestParseBrokenMIME(t *testing.T) {
	hdr := "From: a@example.com\r\nTo: travel@example.org\r\nSubject: x\r\nMessage-ID: <b@x>\r\n"
	for name, c := range map[string]struct {
		raw      string
		text     string
		atts     int
		warnings bool
	}{
		"cut short": {hdr + "Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n" +
			"--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=a.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK", "hello", 1, true},
		"bad base64": {hdr + "Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n" +
			"--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=a.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBE!!!!Ri0x\r\n--b--\r\n", "hello", 1, true},
		"no boundary": {hdr + "Content-Type: multipart/mixed\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b--\r\n", "", 0, true},
		"bad disposition": {hdr + "Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n" +
			"--b\r\nContent-Type: image/png; name=\"p.png\r\nContent-Disposition: attachment; filename==?\r\n\r\nxx\r\n--b--\r\n", "hello", 1, true},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := ParseMessage([]byte(c.raw), ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Inbound.MessageID != "b@x" || p.Inbound.Text != c.text || len(p.Inbound.Attachments) != c.atts || (len(p.Warnings) > 0) != c.warnings {
				t.Fatalf("id %q text %q attachments %+v warnings %q", p.Inbound.MessageID, p.Inbound.Text, p.Inbound.Attachments, p.Warnings)
			}
		})
	}
}

// FuzzInboundExtraction: whatever the message, the recipients, full text
// and attachments stay within their bounds and shapes.
func FuzzInboundExtraction(f *testing.F) {
	files, _ := filepath.Glob("testdata/replies/*.eml")
	for _, fn := range files[:min(len(files), 8)] {
		if b, err := os.ReadFile(fn); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(conversationMail("travel@example.org")))
	f.Add([]byte(attachMail(3, 5, func(i int) string { return fmt.Sprintf("..\\f%d\u202e.txt", i) }, "image/png")))
	opts := ParseOptions{MaxBytes: 1 << 20, MaxAttachmentBytes: 64, MaxAttachments: 4, ConversationKey: convKey}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParseMessage(raw, opts)
		if err != nil {
			return
		}
		in := p.Inbound
		if len(in.Recipients) > MaxRecipients {
			t.Fatalf("%d recipients", len(in.Recipients))
		}
		seen := map[string]bool{}
		for _, r := range in.Recipients {
			if r != strings.ToLower(r) || seen[r] || strings.ContainsFunc(r, isCtl) || !strings.Contains(r, "@") {
				t.Fatalf("recipient %q", r)
			}
			seen[r] = true
		}
		if len(in.FullText) > MaxFullTextBytes {
			t.Fatalf("full text %d bytes", len(in.FullText))
		}
		if len(in.Attachments) > opts.MaxAttachments {
			t.Fatalf("%d attachments", len(in.Attachments))
		}
		var kept int
		for _, a := range in.Attachments {
			kept += len(a.Data)
			if a.Data != nil && int64(len(a.Data)) != a.Size {
				t.Fatalf("attachment %q: %d bytes, size %d", a.Filename, len(a.Data), a.Size)
			}
			if a.Filename == "" || !utf8.ValidString(a.Filename) || utf8.RuneCountInString(a.Filename) > maxFilename ||
				strings.ContainsAny(a.Filename, `/\:*?"<>|`) || strings.ContainsFunc(a.Filename, func(r rune) bool {
				return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
			}) {
				t.Fatalf("file name %q", a.Filename)
			}
			if !envelope.ValidMediaType(a.MediaType) {
				t.Fatalf("media type %q", a.MediaType)
			}
		}
		if kept > opts.MaxAttachmentBytes {
			t.Fatalf("%d attachment bytes kept", kept)
		}
		if in.Conversation != "" {
			t.Fatalf("forged conversation %q", in.Conversation)
		}
	})
}
