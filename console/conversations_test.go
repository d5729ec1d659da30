package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// fakeConversations serves two conversations (an email thread with a sent
// answer, a WhatsApp thread whose answer is held behind a closed window) and
// their inbound messages, one of them refused.
type fakeConversations struct {
	gotInbound api.InboundQuery
	gotConv    api.ConversationQuery
}

func (f *fakeConversations) items() ([]api.ConversationItem, map[string]*api.ConversationDetail) {
	at := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	email := api.ConversationItem{ID: "cnv_email1", Agent: "travel", Channel: "email", OurAddress: "travel@example.org",
		Participants: []string{"ann@example.org"}, Subject: "Flights to Lisbon", CreatedAt: at, UpdatedAt: at.Add(10 * time.Minute), LastInboundAt: at, Turns: 1}
	wa := api.ConversationItem{ID: "cnv_wa1", Agent: "travel", Channel: "whatsapp", OurAddress: "+15550002222",
		Participants: []string{"+447700900123"}, CreatedAt: at.Add(-30 * time.Hour), UpdatedAt: at.Add(time.Minute), LastInboundAt: at.Add(-26 * time.Hour), Turns: 2}
	return []api.ConversationItem{email, wa}, map[string]*api.ConversationDetail{
		"cnv_email1": {Conversation: email, Messages: []api.Message{
			{At: at, Direction: "in", InboundID: "inb_1", Text: "Any flights to Lisbon on Friday?\nTwo adults.", State: "turn", AnsweredBy: "push"},
			{At: at.Add(10 * time.Minute), Direction: "out", DeliveryID: "dlv_answer1", Text: "Two direct flights on Friday: EJ4521 at 07:10, BA2043 at 12:35.", State: "sent"},
		}},
		"cnv_wa1": {Conversation: wa, Messages: []api.Message{
			{At: at.Add(-26 * time.Hour), Direction: "in", InboundID: "inb_2", Text: "Can you find me a hotel?", State: "turn", AnsweredBy: "poll"},
			{At: at.Add(time.Minute), Direction: "out", DeliveryID: "dlv_answer2", Text: "Hotel Lisboa has a room.", State: "held"},
		}, Window: &api.Window{Open: false, ClosesAt: at.Add(-2 * time.Hour)}},
	}
}

func (f *fakeConversations) ListInbound(ctx context.Context, q api.InboundQuery) ([]api.InboundItem, string, error) {
	f.gotInbound = q
	at := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	all := []api.InboundItem{
		{ID: "inb_3", Channel: "email", From: "mallory@evil.example", To: "travel@example.org", Subject: "Cheap pills", Text: "Buy now",
			ReceivedAt: at.Add(time.Hour), Disposition: "rejected", Reason: "sender not allowed by agents.travel.inbound.allow", Agent: "travel"},
		{ID: "inb_1", Channel: "email", From: "ann@example.org", To: "travel@example.org", Subject: "Flights to Lisbon", Text: "Any flights to Lisbon on Friday?",
			Attachments: []api.AttachmentItem{{Filename: "passport.pdf", MediaType: "application/pdf", Size: 81234}},
			ReceivedAt:  at, Disposition: "turn", Agent: "travel", ConversationID: "cnv_email1", TurnID: "trn_1"},
		{ID: "inb_0", Channel: "sms", From: "+447700900999", To: "+15550001111", Text: "YES 123456", ReceivedAt: at.Add(-time.Hour),
			Disposition: "approval", ApprovalID: "appr_1"},
	}
	var out []api.InboundItem
	for _, it := range all {
		if (q.Disposition == "" || it.Disposition == q.Disposition) && (q.Channel == "" || it.Channel == q.Channel) {
			out = append(out, it)
		}
	}
	return out, "", nil
}

func (f *fakeConversations) ListConversations(ctx context.Context, q api.ConversationQuery) ([]api.ConversationItem, string, error) {
	f.gotConv = q
	cs, _ := f.items()
	var out []api.ConversationItem
	for _, c := range cs {
		if q.Channel == "" || c.Channel == q.Channel {
			out = append(out, c)
		}
	}
	if len(out) > q.Limit {
		return out[:q.Limit], out[q.Limit-1].ID, nil
	}
	return out, "", nil
}

func (f *fakeConversations) Conversation(ctx context.Context, id string) (*api.ConversationDetail, error) {
	_, ds := f.items()
	if d, ok := ds[id]; ok {
		return d, nil
	}
	return nil, store.ErrNotFound
}

func TestConversationScreens(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	// The navigation shows both screens.
	_, body, _ := f.get(readKey, "/ui/")
	if !strings.Contains(body, `href="/ui/conversations"`) || !strings.Contains(body, `href="/ui/inbound"`) {
		t.Fatalf("navigation lacks the screens:\n%.1500s", body)
	}
	// The thread: both directions, in order, with the state of the answer
	// and a link to its delivery.
	code, body, _ := f.get(readKey, "/ui/conversations/cnv_email1")
	in, out := strings.Index(body, "Two adults."), strings.Index(body, "Two direct flights")
	if code != 200 || in < 0 || out < in || !strings.Contains(body, `href="/ui/deliveries/dlv_answer1"`) || !strings.Contains(body, `<span class="badge good">sent</span>`) ||
		strings.Contains(body, "WhatsApp window") {
		t.Fatalf("email thread: %d\n%s", code, body)
	}
	code, body, _ = f.get(readKey, "/ui/conversations/cnv_wa1")
	if code != 200 || !strings.Contains(body, `<span class="badge warn">closed</span>`) || !strings.Contains(body, `<span class="badge warn">held</span>`) {
		t.Fatalf("whatsapp thread: %d\n%s", code, body)
	}
	for _, p := range []string{"/ui/conversations/cnv_nope", "/ui/conversations/dlv_1", "/ui/conversations/cnv_%3Cx%3E"} {
		if code, _, _ := f.get(readKey, p); code != 404 {
			t.Errorf("%s: %d", p, code)
		}
	}
	// Filters pass through; empty fields are no filter; a bad value is
	// named on the page, not a crash.
	if code, _, _ := f.get(readKey, "/ui/conversations?channel=whatsapp&agent="); code != 200 || f.conv.gotConv != (api.ConversationQuery{Channel: "whatsapp", Limit: pageSize}) {
		t.Fatalf("conversation filter: %d %+v", code, f.conv.gotConv)
	}
	code, body, _ = f.get(readKey, "/ui/inbound?disposition=turn&channel=&done=retried")
	if code != 200 || f.conv.gotInbound != (api.InboundQuery{Disposition: "turn", Limit: pageSize}) || strings.Contains(body, "mallory") || !strings.Contains(body, "passport.pdf") ||
		!strings.Contains(body, `href="/ui/conversations/cnv_email1"`) || !strings.Contains(body, `<option selected>turn</option>`) {
		t.Fatalf("inbound filter: %d %+v\n%s", code, f.conv.gotInbound, body)
	}
	code, body, _ = f.get(readKey, "/ui/inbound?disposition=bogus")
	if code != 400 || !strings.Contains(body, "disposition: unknown disposition") {
		t.Fatalf("bad disposition: %d\n%s", code, body)
	}
	code, body, _ = f.get(readKey, "/ui/conversations?channel=webhook")
	if code != 400 || !strings.Contains(body, "channel: unknown channel") {
		t.Fatalf("bad channel: %d\n%s", code, body)
	}
	// A page that is cut links to the next.
	if _, body, _ = f.get(readKey, "/ui/conversations?limit=1"); !strings.Contains(body, "after=cnv_email1") {
		t.Fatalf("no next link:\n%s", body)
	}
	// Signed out: sent to the sign-in page.
	if code, _, h := f.get("", "/ui/inbound"); code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ui/login") {
		t.Fatalf("signed out: %d %v", code, h)
	}
}

func TestConversationScreensHiddenWithoutConversations(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	c, err := New(Config{Keys: []Key{{Secret: fullKey}}, Secret: []byte("0123456789abcdef0123")},
		Deps{DB: db, Approvals: &fakeApprovals{}, Renditions: fakeRenditions{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	f := &fixture{t: t, srv: srv}
	_, body, _ := f.get(fullKey, "/ui/")
	if strings.Contains(body, "/ui/conversations") || strings.Contains(body, "/ui/inbound") {
		t.Fatalf("navigation shows screens that do not exist:\n%s", body)
	}
	for _, p := range []string{"/ui/conversations", "/ui/conversations/cnv_email1", "/ui/inbound"} {
		if code, body, _ := f.get(fullKey, p); code != 404 || !strings.Contains(body, "not enabled") {
			t.Errorf("%s: %d", p, code)
		}
	}
}
