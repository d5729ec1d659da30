package render

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
)

// checkSlackLimits fails the test for any block outside Slack's Block Kit
// limits, or any mrkdwn with an angle bracket beachd did not put there.
func checkSlackLimits(t testing.TB, s *Slack) {
	t.Helper()
	if n := len(s.Blocks); n == 0 || n > SlackMaxBlocks {
		t.Errorf("%d blocks; Slack takes 1 to %d", n, SlackMaxBlocks)
	}
	if s.Text == "" || utf8.RuneCountInString(s.Text) > slackMaxTextField {
		t.Errorf("notification text of %d characters", utf8.RuneCountInString(s.Text))
	}
	checkMrkdwn(t, "text", s.Text)
	for i, b := range s.Blocks {
		where := fmt.Sprintf("blocks[%d] (%s)", i, b.Type)
		if b.Text != nil {
			lim := SlackMaxSectionText
			if b.Type == "header" {
				lim = SlackMaxHeaderText
			}
			if n := utf8.RuneCountInString(b.Text.Text); n == 0 || n > lim {
				t.Errorf("%s: text of %d characters, limit %d", where, n, lim)
			}
			if b.Text.Type == "mrkdwn" {
				checkMrkdwn(t, where, b.Text.Text)
			}
		}
		if len(b.Fields) > SlackMaxFields {
			t.Errorf("%s: %d fields", where, len(b.Fields))
		}
		for _, f := range b.Fields {
			if n := utf8.RuneCountInString(f.Text); n > SlackMaxFieldText {
				t.Errorf("%s: field of %d characters", where, n)
			}
			checkMrkdwn(t, where, f.Text)
		}
		if b.Type == "context" && len(b.Elements) > SlackMaxContext {
			t.Errorf("%s: %d elements", where, len(b.Elements))
		}
		for _, e := range b.Elements {
			switch e := e.(type) {
			case SlackButton:
				if utf8.RuneCountInString(e.Text.Text) > SlackMaxButtonText || len(e.Value) > SlackMaxButtonValue {
					t.Errorf("%s: button %+v over its limits", where, e)
				}
			case SlackText:
				checkMrkdwn(t, where, e.Text)
			}
		}
		if b.Type == "section" && b.Text == nil && len(b.Fields) == 0 {
			t.Errorf("%s: a section with neither text nor fields", where)
		}
	}
}

// ourLink is the only angle-bracket form beachd writes: a link to an
// http(s) URL with an escaped label.
var ourLink = regexp.MustCompile(`<https?://[^<>| \n]+(\|[^<>|]*)?>`)

func checkMrkdwn(t testing.TB, where, s string) {
	t.Helper()
	rest := strings.ReplaceAll("\n"+ourLink.ReplaceAllString(s, ""), "\n> ", "\n")
	if strings.ContainsAny(rest, "<>") {
		t.Errorf("%s: unescaped angle bracket in %q", where, s)
	}
}

func slackEnv(parts ...envelope.Part) *envelope.Envelope {
	return &envelope.Envelope{Role: "agent", Parts: parts,
		Meta: envelope.Meta{SessionID: "s", TurnID: "t", ProducedAt: testNow, FinalizedBy: "complete"}}
}

func slackTextPart(s string) envelope.Part {
	return envelope.Part{Text: &s, Metadata: map[string]any{"partType": envelope.PartResponse}}
}

// Content cannot mention anyone, link anywhere or break the markup: &, <
// and > are escaped everywhere mrkdwn is, in text, fields and approvals.
func TestSlackEscapesContent(t *testing.T) {
	r := newTestRenderer(t, Config{})
	hostile := "Hi <!channel> and <@U999> & <https://evil.example|your bank> <!date^1392734382^x|y> @here"
	dd := envelope.Part{Data: json.RawMessage(`{"<!here>":"<@U1> & co","fare":"£1 < £2"}`), Metadata: map[string]any{"partType": envelope.PartDomainData}}
	ar := envelope.Part{Data: json.RawMessage(`{"approvalId":"apr_1","toolName":"refund","summary":"Refund <!everyone>","args":{"who":"<@U2>"},"handler":"agent <x>"}`),
		Metadata: map[string]any{"partType": envelope.PartApprovalRequest}}
	env := slackEnv(slackTextPart(hostile), dd, ar)
	env.Meta.FinalizedBy = "suspended"
	in := Input{Envelope: env, Now: testNow, Recipient: Recipient{Channel: envelope.ChannelSlack, Address: "U012AB3CD"},
		Approvals: []ApprovalHandle{{ApprovalID: "apr_1", Buttons: []Button{{Title: "Approve", Payload: "apr_1:aaa"}, {Title: "Deny", Payload: "apr_1:bbb"}}}}}
	s, err := r.Slack(in)
	if err != nil {
		t.Fatal(err)
	}
	checkSlackLimits(t, s)
	b, _ := json.Marshal(s)
	for _, bad := range []string{"<!channel>", "<@U999>", "<!here>", "<@U1>", "<!everyone>", "<@U2>", "<https://evil.example", "<!date", "agent <x>"} {
		if strings.Contains(string(b), bad) || strings.Contains(s.Text, bad) {
			t.Errorf("%q reached Slack unescaped:\n%s", bad, b)
		}
	}
	if !strings.Contains(s.Blocks[0].Text.Text, "&lt;!channel&gt; and &lt;@U999&gt; &amp; ") {
		t.Errorf("text not escaped as Slack asks:\n%s", b)
	}
	// The buttons carry the payloads, under the action ids the endpoint reads.
	var acts *SlackBlock
	for i := range s.Blocks {
		if s.Blocks[i].Type == "actions" {
			acts = &s.Blocks[i]
		}
	}
	if acts == nil || acts.BlockID != "approval:apr_1" || len(acts.Elements) != 2 {
		t.Fatalf("no approval buttons: %+v", s.Blocks)
	}
	ap, dn := acts.Elements[0].(SlackButton), acts.Elements[1].(SlackButton)
	if ap.ActionID != SlackActionApprove || ap.Value != "apr_1:aaa" || ap.Style != "primary" ||
		dn.ActionID != SlackActionDeny || dn.Value != "apr_1:bbb" || dn.Style != "danger" {
		t.Errorf("buttons %+v %+v", ap, dn)
	}
}

// A text of any length, many approvals, surfaces and data: the message
// stays within 50 blocks and 3,000-character sections, the approvals are
// all there, the cut text links to the whole message.
func TestSlackWithinLimits(t *testing.T) {
	r := newTestRenderer(t, Config{})
	long := strings.Repeat("A long paragraph of words & <things> that goes on. ", 3000) // ~150 kB
	var parts []envelope.Part
	parts = append(parts, slackTextPart(long))
	var handles []ApprovalHandle
	for i := range 5 {
		id := fmt.Sprintf("apr_%d", i)
		parts = append(parts, envelope.Part{Data: json.RawMessage(fmt.Sprintf(`{"approvalId":%q,"toolName":"book","args":{"a":%q}}`, id, strings.Repeat("x<", 3000))),
			Metadata: map[string]any{"partType": envelope.PartApprovalRequest}})
		handles = append(handles, ApprovalHandle{ApprovalID: id, ExpiresAt: testNow.Add(time.Hour),
			Buttons: []Button{{Title: "Approve", Payload: id + ":a"}, {Title: "Deny", Payload: id + ":d"}}})
	}
	obj := map[string]string{}
	for i := range 40 {
		obj[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", 5000)
	}
	dd, _ := json.Marshal(obj)
	parts = append(parts, envelope.Part{Data: dd, Metadata: map[string]any{"partType": envelope.PartDomainData}})
	env := slackEnv(parts...)
	env.Meta.FinalizedBy = "suspended"
	s, err := r.Slack(Input{Envelope: env, Now: testNow, Recipient: Recipient{Channel: envelope.ChannelSlack, Address: "C0123ABCD"},
		Approvals: handles, FullMessageURL: "https://beachd.example.org/m/x"})
	if err != nil {
		t.Fatal(err)
	}
	checkSlackLimits(t, s)
	if !s.Truncated || len(s.Warnings) == 0 {
		t.Errorf("truncated %v, warnings %q", s.Truncated, s.Warnings)
	}
	buttons := 0
	cutLink := false
	for _, b := range s.Blocks {
		if b.Type == "actions" {
			buttons++
		}
		if b.Text != nil && strings.Contains(b.Text.Text, "<https://beachd.example.org/m/x|read it whole>") {
			cutLink = true
		}
	}
	if buttons != 5 || !cutLink {
		t.Errorf("%d approvals with buttons (want 5), link to the whole message %v", buttons, cutLink)
	}
}

// An expired approval shows no buttons; a text-only result is one section.
func TestSlackExpiredAndPlain(t *testing.T) {
	r := newTestRenderer(t, Config{})
	ar := envelope.Part{Data: json.RawMessage(`{"approvalId":"apr_1","toolName":"refund"}`), Metadata: map[string]any{"partType": envelope.PartApprovalRequest}}
	env := slackEnv(slackTextPart("Shall I?"), ar)
	s, err := r.Slack(Input{Envelope: env, Now: testNow, Recipient: Recipient{Channel: envelope.ChannelSlack, Address: "U1AB"},
		Approvals: []ApprovalHandle{{ApprovalID: "apr_1", ExpiresAt: testNow.Add(-time.Minute),
			Buttons: []Button{{Title: "Approve", Payload: "apr_1:a"}, {Title: "Deny", Payload: "apr_1:d"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s.Blocks)
	if strings.Contains(string(b), `"actions"`) || !strings.Contains(string(b), "expired") {
		t.Errorf("expired approval: %s", b)
	}
	p, err := r.Slack(Input{Envelope: slackEnv(slackTextPart("**Booked**: flight BA117 & hotel")), Now: testNow,
		Recipient: Recipient{Channel: envelope.ChannelSlack, Address: "U1AB"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Blocks) != 1 || p.Blocks[0].Text.Text != "*Booked*: flight BA117 &amp; hotel" || p.Text != "*Booked*: flight BA117 &amp; hotel" {
		t.Errorf("plain result: %+v", p)
	}
}

// Sections split long text at word boundaries, never inside an entity.
func TestSlackSectionsSplit(t *testing.T) {
	s := SlackEscape(strings.Repeat("&", 7000))
	var joined strings.Builder
	for _, b := range slackSections(s) {
		if n := utf8.RuneCountInString(b.Text.Text); n > SlackMaxSectionText {
			t.Fatalf("section of %d", n)
		}
		if strings.Count(b.Text.Text, "&") != strings.Count(b.Text.Text, "&amp;") {
			t.Fatalf("entity split: %q…", b.Text.Text[len(b.Text.Text)-10:])
		}
		joined.WriteString(b.Text.Text)
	}
	if joined.String() != s {
		t.Error("text lost in splitting")
	}
}
