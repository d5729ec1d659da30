package render

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
	"golang.org/x/net/html"
)

func textEnv(partType, text, finalizedBy string) *envelope.Envelope {
	return &envelope.Envelope{Role: "agent",
		Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": partType}}},
		Meta:  envelope.Meta{SessionID: "s", TurnID: "t", ProducedAt: testNow, FinalizedBy: finalizedBy}}
}

func addData(env *envelope.Envelope, partType string, v any) {
	b, _ := json.Marshal(v)
	env.Parts = append(env.Parts, envelope.Part{Data: b, Metadata: map[string]any{"partType": partType}})
}

func TestSubjectRules(t *testing.T) {
	r := newTestRenderer(t, Config{})
	long := strings.Repeat("Supercalifragilistic words go on and on ", 5)
	for _, tc := range []struct {
		name, text, kind, want string
	}{
		{"first sentence", "Your table is booked. See you Friday.", "complete", "Your table is booked"},
		{"first line, markdown stripped", "**Done**: booked\nsecond line", "complete", "Done: booked"},
		{"question kept", "Gatwick or Heathrow? Tell me.", "clarifying", "Gatwick or Heathrow?"},
		{"long cut at a word", long, "complete", ""},
		{"no words falls back to the kind's phrase", "**   **\n---", "error", "There was a problem with your request"},
		{"only whitespace with a file names the file", "   \n\t ", "error", "File: a.txt"},
		{"control characters folded", "Line\u2028two\x07three", "complete", "Line two three"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := textEnv(envelope.PartResponse, tc.text, tc.kind)
			if tc.kind == "error" {
				env = textEnv(envelope.PartError, tc.text, tc.kind)
			}
			if strings.HasSuffix(tc.name, "names the file") {
				// Whitespace alone is nothing to send: the file is the message.
				addData(env, envelope.PartArtifact, map[string]any{"artifactId": "a", "name": "a.txt", "mimeType": "text/plain", "uri": "https://x.example/a"})
			}
			e, err := r.Email(Input{Envelope: env})
			if err != nil {
				t.Fatal(err)
			}
			s := e.Subject
			if s == "" || strings.ContainsAny(s, "\r\n") || utf8.RuneCountInString(s) > 78 {
				t.Fatalf("subject %q breaks the rules", s)
			}
			if tc.want != "" && s != tc.want {
				t.Errorf("subject %q, want %q", s, tc.want)
			}
			if tc.name == "long cut at a word" && (!strings.HasSuffix(s, "…") || strings.HasSuffix(s, " …")) {
				t.Errorf("long subject %q not cut at a word with an ellipsis", s)
			}
		})
	}
}

func TestEmailApprovalTokenEverywhere(t *testing.T) {
	r := newTestRenderer(t, Config{})
	env := textEnv(envelope.PartResponse, strings.Repeat("A very long opening sentence that fills the subject ", 3), "suspended")
	exp := testNow.Add(2 * time.Hour)
	ar := envelope.ApprovalRequest{ApprovalID: "ap1", ToolName: "send_money", ToolCallID: "c1", Args: map[string]any{"amount": 5},
		Handler: "payments", Turn: "t", Session: "s", ExpiresAt: &exp}
	addData(env, envelope.PartApprovalRequest, ar)
	e, err := r.Email(Input{Envelope: env, DeliveryID: "dlv 1/x", From: "Agent <agent@example.org>", ReplyTo: "Replies <r@reply.example.org>",
		Approvals: []ApprovalHandle{{ApprovalID: "ap1", Token: testToken, LinkURL: "https://b.example/a/xyz"}}})
	if err != nil {
		t.Fatal(err)
	}
	tag := "[approval:" + testToken + "]"
	if !strings.HasSuffix(e.Subject, " "+tag) || utf8.RuneCountInString(e.Subject) > 78 {
		t.Errorf("subject %q: tag missing or too long", e.Subject)
	}
	if want := "<dlv-1-x." + testToken + "@example.org>"; e.MessageID != want || e.Headers["Message-ID"] != want {
		t.Errorf("Message-ID %q, want %q", e.MessageID, want)
	}
	if got := e.Headers["Reply-To"]; got != `"Replies" <r+`+testToken+`@reply.example.org>` {
		t.Errorf("Reply-To %q", got)
	}
	for _, want := range []string{"APPROVE", "DENY", tag, "https://b.example/a/xyz", "payments", "in 2 hours", "send_money", "amount: 5"} {
		if !strings.Contains(e.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, e.Text)
		}
		if want == "amount: 5" {
			want = ">5</td>" // a table row in HTML
		}
		if !strings.Contains(e.HTML, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if e.Headers["Auto-Submitted"] != "auto-generated" || e.Headers["X-Auto-Response-Suppress"] != "All" {
		t.Errorf("auto-reply headers: %v", e.Headers)
	}
}

// unsafeHTML tokenizes s as a browser would and names the first thing a
// mail client must never get from us: active elements, event handlers,
// non-http(s)/mailto URLs, external style sheets. "" means clean.
func unsafeHTML(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			switch tok.Data {
			case "script", "iframe", "object", "embed", "form", "link", "style", "base", "meta":
				if tok.Data == "meta" && len(tok.Attr) > 0 && (tok.Attr[0].Key == "charset" || tok.Attr[0].Key == "name") {
					break
				}
				return "<" + tok.Data + ">"
			}
			for _, a := range tok.Attr {
				k := strings.ToLower(a.Key)
				if strings.HasPrefix(k, "on") {
					return "attribute " + k
				}
				if k == "href" || k == "src" || k == "action" || k == "formaction" {
					// A scheme other than http(s)/mailto is dangerous; a
					// relative reference is merely useless in mail.
					v := strings.ToLower(strings.TrimSpace(a.Val))
					if i := strings.IndexAny(v, ":/?#"); i > 0 && v[i] == ':' {
						if sch := v[:i]; sch != "https" && sch != "http" && sch != "mailto" {
							return k + "=" + a.Val
						}
					}
				}
			}
		}
	}
}

func TestEmailEscapesHostileText(t *testing.T) {
	r := newTestRenderer(t, Config{})
	hostile := "Hi <script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) **<b>bold</b>** `<i>`\n\n- <style>body{}</style>"
	env := textEnv(envelope.PartResponse, hostile, "complete")
	addData(env, envelope.PartCitation, map[string]any{"title": "<script>x</script>", "url": "javascript:alert(1)"})
	addData(env, envelope.PartArtifact, map[string]any{"artifactId": "<b>", "mimeType": "text/html", "name": "\"><script>.html", "uri": "https://x.example/a?<>"})
	e, err := r.Email(Input{Envelope: env})
	if err != nil {
		t.Fatal(err)
	}
	body := e.HTML
	if bad := unsafeHTML(body); bad != "" {
		t.Errorf("HTML carries %s:\n%s", bad, body)
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("hostile text not shown escaped:\n%s", body)
	}
	// (text/plain shows the literal Markdown, which is harmless there.)
}

func TestSMSTruncateKeepsApproval(t *testing.T) {
	r := newTestRenderer(t, Config{})
	env := textEnv(envelope.PartResponse, strings.Repeat("Lots of detail about the trip. ", 100), "suspended")
	addData(env, envelope.PartApprovalRequest, envelope.ApprovalRequest{ApprovalID: "ap1", ToolName: "book", ToolCallID: "c", Args: map[string]any{},
		Handler: "h", Turn: "t", Session: "s", Summary: "Book the hotel"})
	s, err := r.SMS(Input{Envelope: env, FullMessageURL: "https://b.example/m/1", Approvals: []ApprovalHandle{{ApprovalID: "ap1", Code: "4821"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Truncated || s.Encoding != GSM7 {
		t.Errorf("truncated %v, encoding %s", s.Truncated, s.Encoding)
	}
	if n := smsUnits(s.Body, s.Encoding); n > 1600 {
		t.Errorf("body of %d units over the cap", n)
	}
	for _, want := range []string{"...", "Full message: https://b.example/m/1", "Reply YES 4821 or NO 4821", "Approve: Book the hotel?"} {
		if !strings.Contains(s.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, s.Body)
		}
	}
	if _, _, segs := Measure(s.Body); s.Segments != segs || segs > 11 {
		t.Errorf("segments %d (measured %d)", s.Segments, segs)
	}
}

func TestSMSSplit(t *testing.T) {
	r := newTestRenderer(t, Config{SMSPolicy: SMSSplit, SMSMaxChars: 300})
	text := strings.Repeat("Καλημέρα από την Κέρκυρα. ", 40)
	s, err := r.SMS(Input{Envelope: textEnv(envelope.PartResponse, text, "complete")})
	if err != nil {
		t.Fatal(err)
	}
	if s.Truncated || len(s.Parts) < 3 || s.Encoding != UCS2 {
		t.Fatalf("split: truncated %v, %d parts, %s", s.Truncated, len(s.Parts), s.Encoding)
	}
	joined := strings.Join(s.Parts, " ")
	if strings.Join(strings.Fields(joined), " ") != strings.Join(strings.Fields(s.Body), " ") {
		t.Error("parts do not add up to the body")
	}
	total := 0
	for _, p := range s.Parts {
		if smsUnits(p, UCS2) > 300 {
			t.Errorf("part over the cap: %d", smsUnits(p, UCS2))
		}
		_, _, n := Measure(p)
		total += n
	}
	if total != s.Segments {
		t.Errorf("segments %d, parts cost %d", s.Segments, total)
	}
}

func TestWhatsAppButtonsAndLimits(t *testing.T) {
	r := newTestRenderer(t, Config{})
	env := textEnv(envelope.PartResponse, strings.Repeat("word ", 400), "suspended")
	addData(env, envelope.PartApprovalRequest, envelope.ApprovalRequest{ApprovalID: "ap1", ToolName: "book", ToolCallID: "c", Args: map[string]any{},
		Handler: "h", Turn: "t", Session: "s"})
	addData(env, envelope.PartArtifact, map[string]any{"artifactId": "img", "mimeType": "image/png", "uri": "https://x.example/p.png"})
	addData(env, envelope.PartArtifact, map[string]any{"artifactId": "zip", "mimeType": "application/zip", "uri": "https://x.example/f.zip"})
	h := ApprovalHandle{ApprovalID: "ap1", Buttons: []Button{
		{Title: "Approve this booking right now", Payload: "ap1:a"}, {Title: "Deny", Payload: "ap1:b"},
		{Title: "Later", Payload: "ap1:c"}, {Title: "Fourth", Payload: "ap1:d"}}}
	w, err := r.WhatsApp(Input{Envelope: env, Approvals: []ApprovalHandle{h}, WhatsAppWindowOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Buttons) != 3 {
		t.Errorf("%d buttons, want 3", len(w.Buttons))
	}
	for _, b := range w.Buttons {
		if utf8.RuneCountInString(b.Title) > 20 {
			t.Errorf("button title %q over 20 characters", b.Title)
		}
	}
	if n := utf8.RuneCountInString(w.Body); n > 1024 {
		t.Errorf("body of %d characters with buttons", n)
	}
	if !strings.Contains(w.Body, "Approval needed") {
		t.Errorf("approval line cut away:\n%s", w.Body)
	}
	if len(w.MediaURLs) != 1 || w.MediaURLs[0] != "https://x.example/p.png" {
		t.Errorf("media %v: only the PNG is WhatsApp media", w.MediaURLs)
	}
	if !strings.Contains(w.Body, "https://x.example/f.zip") {
		t.Error("the zip should be a link in the body")
	}
	if w.ContentSID != "" {
		t.Error("window open: no content template")
	}
}

func TestWhatsAppWindowClosed(t *testing.T) {
	r := newTestRenderer(t, Config{})
	w, err := r.WhatsApp(Input{Envelope: textEnv(envelope.PartResponse, "Your report is ready.", "complete"),
		WhatsAppTemplate: &ContentTemplate{ContentSID: "HXabc", Variables: map[string]string{"1": "{{.DefaultSubject}}", "2": "{{.Recipient.Name | default \"there\"}}"}}})
	if err != nil {
		t.Fatal(err)
	}
	if w.ContentSID != "HXabc" || w.ContentVariables["1"] != "Your report is ready" || w.ContentVariables["2"] != "there" {
		t.Errorf("content template: %q %v", w.ContentSID, w.ContentVariables)
	}
}

func TestWebhookFilter(t *testing.T) {
	r := newTestRenderer(t, Config{})
	env := textEnv(envelope.PartResponse, "hi", "suspended")
	ctx := "for llms"
	env.Parts = append(env.Parts, envelope.Part{Text: &ctx, Metadata: map[string]any{"partType": envelope.PartLLMContext}})
	addData(env, envelope.PartSetState, map[string]any{"a.b": "c"})
	addData(env, envelope.PartA2UISurface, map[string]any{"createSurface": map[string]any{"surfaceId": "s"}})
	addData(env, envelope.PartApprovalRequest, envelope.ApprovalRequest{ApprovalID: "ap1", ToolName: "t", ToolCallID: "c", Args: map[string]any{}, Handler: "h", Turn: "t", Session: "s"})
	orig := env.Clone()
	got, err := r.Webhook(Input{Envelope: env, Consumes: []string{"llm-context"}, Approvals: []ApprovalHandle{{ApprovalID: "ap1", Token: "TOKEN1", LinkURL: "https://b.example/a/1"}}})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range got.Parts {
		types = append(types, p.PartType())
	}
	if strings.Join(types, ",") != "response,llm-context,approval-request" {
		t.Errorf("parts %v", types)
	}
	if got.Parts[2].Metadata["decisionUrl"] != "https://b.example/a/1" {
		t.Errorf("decision URL missing: %v", got.Parts[2].Metadata)
	}
	if got.Parts[2].Metadata["decisionToken"] != "TOKEN1" {
		t.Errorf("decision token missing: %v", got.Parts[2].Metadata)
	}
	if _, ok := env.Parts[4].Metadata["decisionUrl"]; ok {
		t.Error("the input envelope was modified")
	}
	b1, _ := json.Marshal(orig)
	b2, _ := json.Marshal(env)
	if string(b1) != string(b2) {
		t.Error("the input envelope changed")
	}
}

func TestDomainDataAndArtifacts(t *testing.T) {
	env := textEnv(envelope.PartResponse, "Here you go.", "complete")
	addData(env, envelope.PartDomainData, map[string]any{"n": 1})
	env.Parts[1].Metadata["slotKey"] = "ta.results"
	addData(env, envelope.PartArtifact, map[string]any{"artifactId": "big", "mimeType": "application/pdf", "name": "big.pdf", "uri": "https://x.example/big.pdf"})
	in := Input{Envelope: env, Artifacts: []FetchedArtifact{{ArtifactID: "big", Note: "too large to attach (30 MB)", URL: "https://x.example/big.pdf"}}}

	off := newTestRenderer(t, Config{})
	e, err := off.Email(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Attachments) != 0 || !strings.Contains(strings.Join(e.Warnings, ";"), "domain-data not shown") {
		t.Errorf("without attach_domain_data: attachments %v, warnings %v", e.Attachments, e.Warnings)
	}
	if !strings.Contains(e.Text, "big.pdf: https://x.example/big.pdf (too large to attach (30 MB))") {
		t.Errorf("artifact link with note missing:\n%s", e.Text)
	}
	on := newTestRenderer(t, Config{AttachDomainData: true})
	e, err = on.Email(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Attachments) != 1 || e.Attachments[0].Filename != "ta.results.json" || !json.Valid(e.Attachments[0].Bytes) {
		t.Errorf("domain-data attachment: %+v", e.Attachments)
	}
	capped := newTestRenderer(t, Config{MaxAttachmentBytes: 10})
	in.Artifacts = []FetchedArtifact{{ArtifactID: "big", Bytes: make([]byte, 11), URL: "https://x.example/big.pdf"}}
	e, err = capped.Email(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Attachments) != 0 || !strings.Contains(e.Text, "too large to attach") {
		t.Errorf("over the cap should be a link with a note: %v\n%s", e.Attachments, e.Text)
	}
}

func TestNothingToDeliver(t *testing.T) {
	r := newTestRenderer(t, Config{})
	env := textEnv(envelope.PartLLMContext, "for LLMs only", "complete")
	if _, err := r.SMS(Input{Envelope: env}); !errors.Is(err, ErrEmpty) {
		t.Errorf("SMS of llm-context only: %v, want ErrEmpty", err)
	}
	if _, err := r.Email(Input{}); !errors.Is(err, ErrNoEnvelope) {
		t.Errorf("no envelope: %v", err)
	}
}

func TestNotices(t *testing.T) {
	r := newTestRenderer(t, Config{})
	at := time.Date(2026, 4, 20, 10, 5, 0, 0, time.UTC)
	n, err := r.Notice(KindApprovalConfirmation, NoticeInput{Channel: "email", Summary: "Book BA2043", Decision: "granted", DecidedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if n.Subject != "Approved: Book BA2043" || !strings.Contains(n.Text, "You approved: Book BA2043") || !strings.Contains(n.HTML, "approved") {
		t.Errorf("confirmation: %+v", n)
	}
	n, err = r.Notice(KindAlreadyDecided, NoticeInput{Channel: "sms", Summary: "Book BA2043", Decision: "denied", DecidedBy: "bob@example.org"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Text != "Already denied by bob@example.org: Book BA2043. Your reply changed nothing.\n" {
		t.Errorf("already decided: %q", n.Text)
	}
	n, err = r.Notice(KindNotUnderstood, NoticeInput{Channel: "email", Summary: "Book BA2043", Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(n.Subject, "[approval:"+testToken+"]") || !strings.Contains(n.Text, "APPROVE or DENY") {
		t.Errorf("not understood: %+v", n)
	}
	n, err = r.Notice(KindNotUnderstood, NoticeInput{Channel: "whatsapp", Code: "4821"})
	if err != nil || !strings.Contains(n.Text, "Reply YES 4821 or NO 4821") {
		t.Errorf("whatsapp not understood: %+v %v", n, err)
	}
	if _, err := r.Notice("bogus", NoticeInput{Channel: "sms"}); !errors.Is(err, ErrUnknownNotice) {
		t.Errorf("bogus kind: %v", err)
	}
}

func TestMarkdown(t *testing.T) {
	src := "# Plan\n\nSee **this** and *that* and `code`, [docs](https://x.example/d) or https://x.example/e.\n\n1. one\n2. two\n\n- a\n- b\n\n> quoted"
	wantText := "Plan\n\nSee this and that and code, docs (https://x.example/d) or https://x.example/e.\n\n1. one\n2. two\n\n- a\n- b\n\n> quoted"
	if got := markdownText(src); got != wantText {
		t.Errorf("text:\n%s\nwant:\n%s", got, wantText)
	}
	html := markdownHTML(src)
	for _, want := range []string{"<strong>this</strong>", "<em>that</em>", `<a href="https://x.example/d"`, `<a href="https://x.example/e"`, "<ol", "<ul", "<blockquote", "<h2"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %s:\n%s", want, html)
		}
	}
	if got := markdownWhatsApp("**bold** and *it*"); got != "*bold* and _it_" {
		t.Errorf("whatsapp: %q", got)
	}
	if got := markdownText("snake_case_name and file_v2_final"); got != "snake_case_name and file_v2_final" {
		t.Errorf("intra-word markers must stay: %q", got)
	}
}

// An expired approval is shown as expired, and nothing in its rendition
// invites an answer: no reply instructions, code, link, token or button.
func TestExpiredApprovalReadsWell(t *testing.T) {
	r := newTestRenderer(t, Config{})
	env := textEnv(envelope.PartResponse, "Shall I book?", "suspended")
	past := testNow.Add(-time.Hour)
	addData(env, envelope.PartApprovalRequest, envelope.ApprovalRequest{ApprovalID: "ap1", ToolName: "book", ToolCallID: "c", Args: map[string]any{},
		Handler: "h", Turn: "t", Session: "s", Summary: "Book it", ExpiresAt: &past})
	const link = "https://beachd.example.org/a/tok"
	h := ApprovalHandle{ApprovalID: "ap1", Token: testToken, Code: "4821", LinkURL: link,
		Buttons: []Button{{Title: "Approve", Payload: "ap1:yes"}, {Title: "Deny", Payload: "ap1:no"}}}
	in := Input{Envelope: env, Now: testNow, Approvals: []ApprovalHandle{h}}
	invites := []string{"To answer", "reply", "Reply", "APPROVE", "YES", "4821", link, "/a/tok", testToken, "Tap", "button", "Decide", "decide", "No way to answer"}
	check := func(what, body string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, body)
			}
		}
		for _, no := range invites {
			if strings.Contains(body, no) {
				t.Errorf("%s of an expired approval invites an answer (%q):\n%s", what, no, body)
			}
		}
	}
	s, err := r.SMS(in)
	if err != nil {
		t.Fatal(err)
	}
	check("SMS", s.Body, "Expired, no longer open to an answer: Book it")
	e, err := r.Email(in)
	if err != nil {
		t.Fatal(err)
	}
	check("email text", e.Text, "== Approval request expired ==", "Expired: Mon 20 Apr 2026, 08:51 UTC (it can no longer be approved)")
	check("email HTML", e.HTML, "Approval request expired", "it can no longer be approved")
	if strings.Contains(e.Subject, testToken) || strings.Contains(e.Headers["Message-ID"], testToken) {
		t.Errorf("email carries the approval token: %q %q", e.Subject, e.Headers["Message-ID"])
	}
	w, err := r.WhatsApp(in)
	if err != nil {
		t.Fatal(err)
	}
	check("WhatsApp", w.Body, "This request has expired and can no longer be answered.")
	if len(w.Buttons) != 0 {
		t.Errorf("WhatsApp buttons on an expired approval: %+v", w.Buttons)
	}
}

// A reminder opens with the reminder line on every channel, and an
// email's default subject says it is one; without Reminder neither.
func TestReminderSaysSo(t *testing.T) {
	r := newTestRenderer(t, Config{})
	env := textEnv(envelope.PartResponse, "I need your approval to book the hotel.", "suspended")
	addData(env, envelope.PartApprovalRequest, envelope.ApprovalRequest{ApprovalID: "ap1", ToolName: "book", ToolCallID: "c", Args: map[string]any{},
		Handler: "h", Turn: "t", Session: "s", Summary: "Book the hotel"})
	for _, reminder := range []bool{false, true} {
		e, err := r.Email(Input{Envelope: env, DeliveryID: "d1", From: "Agent <agent@example.org>", Reminder: reminder,
			Approvals: []ApprovalHandle{{ApprovalID: "ap1", Token: testToken}}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := r.SMS(Input{Envelope: env, Reminder: reminder, Approvals: []ApprovalHandle{{ApprovalID: "ap1", Code: "4821"}}})
		if err != nil {
			t.Fatal(err)
		}
		gotSubject := strings.HasPrefix(e.Subject, "Reminder: approve: Book the hotel")
		gotText := strings.HasPrefix(e.Text, ReminderLine) && strings.HasPrefix(s.Body, ReminderLine)
		if gotSubject != reminder || gotText != reminder || !strings.Contains(s.Body, "4821") {
			t.Errorf("reminder %v: subject %q, email text %q, SMS %q", reminder, e.Subject, e.Text[:min(80, len(e.Text))], s.Body)
		}
	}
}
