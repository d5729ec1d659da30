package render

import (
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
)

// TestApprovalMailWithoutReplyIntake: where no intake reads replies, the
// approval mail offers the confirmation link and never asks for a reply —
// no reply instructions, no subject tag, no token in Message-ID or
// Reply-To — and its footer says replies are not read. Without a link
// either, it says that no way to answer was issued.
func TestApprovalMailWithoutReplyIntake(t *testing.T) {
	envs := loadEnvelopes(t)
	env := envs["approval-request"]
	r := newTestRenderer(t, Config{AttachDomainData: true, PublicURL: "https://beachd.example.org", NoEmailReplies: true})
	in := testInput(t, "approval-request", env, envelope.ChannelEmail)
	e, err := r.Email(in)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "approval-request.no-replies.email.txt", emailDump(e))
	golden(t, "approval-request.no-replies.email.html", e.HTML)
	for _, part := range []struct{ name, s string }{{"subject", e.Subject}, {"text", e.Text}, {"html", e.HTML}} {
		low := strings.ToLower(part.s)
		if strings.Contains(low, "reply to this") || strings.Contains(part.s, "[approval:") || strings.Contains(part.s, testToken) {
			t.Errorf("%s invites a reply nobody reads:\n%s", part.name, part.s)
		}
	}
	for k, v := range e.Headers {
		if strings.Contains(v, testToken) {
			t.Errorf("header %s carries the reply token: %s", k, v)
		}
	}
	if !strings.Contains(e.Text, "To answer, open this page: https://beachd.example.org/a/") ||
		!strings.Contains(e.Text, "Replies to this message are not read.") {
		t.Errorf("text lacks the link or the footer:\n%s", e.Text)
	}

	// Neither a reply nor a link: nothing pretends to work.
	for i := range in.Approvals {
		in.Approvals[i].LinkURL = ""
	}
	e, err = r.Email(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Text, "No way to answer this request was issued to you.") || strings.Contains(strings.ToLower(e.Text), "reply to this") {
		t.Errorf("without link and replies:\n%s", e.Text)
	}

	// With an intake the same mail asks for the reply (the default).
	e, err = newTestRenderer(t, Config{AttachDomainData: true, PublicURL: "https://beachd.example.org"}).Email(testInput(t, "approval-request", env, envelope.ChannelEmail))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Text, "reply to this email with APPROVE or DENY") || !strings.Contains(e.Subject, "[approval:"+testToken+"]") {
		t.Errorf("with an intake the mail must ask for a reply:\n%s\n%s", e.Subject, e.Text)
	}
}
