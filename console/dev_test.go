package console

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestDevInboxShowsMail: the Dev inbox shows the mail the local mail server
// accepted, newest first: who it is from and to, the subject, the time, the
// text, the delivery that sent it, and how to answer an approval request
// (this beachd's approval page as a link, the code to send, the reply);
// everything the message says is escaped, and a link to another host is no
// approval link.
func TestDevInboxShowsMail(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	code, body, _ := f.get(fullKey, "/ui/dev")
	if code != 200 {
		t.Fatalf("GET /ui/dev: %d", code)
	}
	for _, want := range []string{
		`<h2 id="mail-h">Mail</h2>`,
		"sent by beachd", "to the agent",
		`Approve: &lt;script&gt;alert(&#34;subject&#34;)&lt;/script&gt; Book BA2043`,
		"Any flights on Friday?",
		"Reply YES 482193 or open this page",
		"&lt;img src=x onerror=alert(1)&gt;",
		"24 Nov 01:31:00 UTC",
		`<a href="/ui/deliveries/dlv_mail1">delivery</a>`,
		`<a href="http://beachd.test/a/tok_abcdefghijklmnop">Open the approval page</a>`,
		"<code>YES 482193</code>",
		"agent+<wbr>tok_reply0123456789<wbr class=\"at\">@beachd.<wbr>localhost",
		"reply to this mail with APPROVE or DENY",
		"mail: SMTP 127.0.0.1:2525",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the dev inbox lacks %q", want)
		}
	}
	if strings.Contains(body, `href="http://evil.example`) || strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
		t.Errorf("the dev inbox links another host's page or lets markup through:\n%s", body)
	}
	// Newest first: the approval mail before the one written to the agent.
	if i, j := strings.Index(body, "BA2043"), strings.Index(body, "Any flights on Friday"); i < 0 || j < 0 || i > j {
		t.Errorf("mail is not newest first (%d, %d)", i, j)
	}
	// The banner's sample code and the reply form's example have six digits.
	if m := regexp.MustCompile(`placeholder="YES (\d+)"`).FindStringSubmatch(body); m == nil || len(m[1]) != 6 {
		t.Errorf("the reply form's example code: %v", m)
	}
}

func TestAnswersFound(t *testing.T) {
	links, codes := answers("Reply YES 482193 or NO 482193, or approve 4821934. Page: http://beachd.test/a/tok_abcdefgh1234 "+
		"and again http://beachd.test/a/tok_abcdefgh1234; elsewhere http://evil.example/a/tok_abcdefgh1234, short http://beachd.test/a/x", "http://beachd.test")
	if !slices.Equal(links, []string{"http://beachd.test/a/tok_abcdefgh1234"}) || !slices.Equal(codes, []string{"482193", "4821934"}) {
		t.Errorf("links %q, codes %q", links, codes)
	}
	if l, c := answers(strings.Repeat("YES 123456 http://beachd.test/a/abcdefgh"+strings.Repeat("x", 5)+" ", 100), "http://beachd.test"); len(l) > 10 || len(c) > 10 {
		t.Errorf("unbounded: %d links, %d codes", len(l), len(c))
	}
}

// FuzzAnswers: whatever a message says, answers returns a bounded number
// of this beachd's approval links and digit codes.
func FuzzAnswers(f *testing.F) {
	for _, s := range []string{"Reply YES 482193", "http://beachd.test/a/tok_abcdefgh1234", "NO 1234567890123 http://beachd.test/a/" + strings.Repeat("a", 300), "\xff YES 123456"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		links, codes := answers(s, "http://beachd.test")
		if len(links) > 10 || len(codes) > 10 {
			t.Fatalf("%d links, %d codes", len(links), len(codes))
		}
		for _, l := range links {
			if !strings.HasPrefix(l, "http://beachd.test/a/") || !strings.Contains(s, l) {
				t.Fatalf("link %q", l)
			}
		}
		for _, c := range codes {
			if len(c) < 4 || len(c) > 10 || strings.Trim(c, "0123456789") != "" || !utf8.ValidString(c) {
				t.Fatalf("code %q", c)
			}
		}
	})
}

// The recorded Slack messages show in the dev inbox, newest first and
// escaped, with a form pressing Approve or Deny as the user asked, a link
// to answer in a message's thread, and the form writing as a Slack user;
// a click or message that is not well formed is refused.
func TestDevInboxShowsSlack(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	code, body, _ := f.get(fullKey, "/ui/dev?slack_channel=C0TRAVEL&slack_thread=1795484400.000003")
	if code != 200 {
		t.Fatalf("GET /ui/dev: %d", code)
	}
	for _, want := range []string{
		`<h2 id="slack-h">Slack</h2>`,
		"Book BA2043 for 6 people, £1,122 &lt;script&gt;alert(3)&lt;/script&gt;",
		`name="approve" value="appr_1:n0nce"`, `name="deny" value="appr_1:n0nce2"`,
		`name="user" value="U012AB3CD"`,
		"only U0MALLORY sees it", "rewritten 24 Nov 01:42:00 UTC",
		"in thread <code>1795484400.000003</code>",
		`id="s-channel" name="channel" placeholder="C0123ABCD" maxlength="32" value="C0TRAVEL"`,
		`value="1795484400.000003"`,
		`action="/ui/dev/slack/message"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the dev inbox lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>alert(3)") {
		t.Errorf("markup let through")
	}
	if i, j := strings.Index(body, "Two direct flights to Lisbon"), strings.Index(body, "Book BA2043 for 6 people, £1,122"); i < 0 || j < 0 || i > j {
		t.Errorf("Slack messages are not newest first (%d, %d)", i, j)
	}
	tok := f.csrf(fullKey)
	for _, form := range []url.Values{
		{"user": {"someone"}, "text": {"hi"}},
		{"user": {"U012AB3CD"}, "text": {" "}},
		{"user": {"U012AB3CD"}, "text": {strings.Repeat("x", 4001)}},
	} {
		form.Set("csrf", tok)
		if code, _, _ := f.post(fullKey, "/ui/dev/slack/message", form, nil); code != http.StatusBadRequest {
			t.Errorf("message %v: %d", form, code)
		}
	}
	for _, form := range []url.Values{
		{"user": {"U012AB3CD"}, "approve": {"appr_1:n0nce"}, "pick": {"other"}},
		{"user": {"not-a-user"}, "approve": {"appr_1:n0nce"}, "pick": {"approve"}},
		{"user": {"U012AB3CD"}, "pick": {"approve"}},
	} {
		form.Set("csrf", tok)
		if code, _, _ := f.post(fullKey, "/ui/dev/slack/click", form, nil); code != http.StatusBadRequest {
			t.Errorf("click %v: %d", form, code)
		}
	}
	if len(f.dev.replies) != 0 {
		t.Errorf("refused forms acted: %v", f.dev.replies)
	}
}

// The Slack screen names the workspace and bot, says when Slack refuses the
// token and which needed scopes it lacks, hints at the event subscriptions
// when no event came, and lists the Slack deliveries with their message's
// place in Slack and their errors.
func TestSlackScreen(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	code, body, _ := f.get(readKey, "/ui/slack")
	if code != 200 {
		t.Fatalf("GET /ui/slack: %d", code)
	}
	for _, want := range []string{
		"<strong>Beach Travel</strong> <code>T0BEACHD1</code>", "<code>U0BEACHD1</code>",
		"Slack refuses the bot token</strong> (token_revoked: the bot token was revoked",
		"The token lacks scopes beachd needs:</strong> <code>users:read.email</code>, <code>im:history</code>",
		"No Slack event has arrived since beachd started",
		"<code>http://beachd.test/v1/inbound/slack/events</code>",
		"rewrite after a decision", "slack ratelimited", "<code>D012AB3CD/1795484400.00000",
		`href="/ui/slack" aria-current="page"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the Slack screen lacks %q", want)
		}
	}
}
