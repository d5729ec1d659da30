package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

const readKey = "read-key-0123456789"

// memConversations is an in-memory Conversations: records, a cursor that
// is the last id of a page, attachments behind an HMAC of id, n and expiry.
type memConversations struct {
	now       time.Time
	urlKey    []byte
	inbound   []InboundItem // newest first
	convs     []ConversationItem
	details   map[string]*ConversationDetail
	resolve   map[string]store.NewDelivery
	files     map[string][][3]string // inbound id → {filename, media type, data}
	transport map[string][]Transport
	lookups   int // OpenAttachment calls that got past the signature
	gotQuery  InboundQuery
	failWith  error
}

func (m *memConversations) sign(id string, n int, expires string) string {
	mac := hmac.New(sha256.New, m.urlKey)
	fmt.Fprintf(mac, "%s\x00%d\x00%s", id, n, expires)
	return hex.EncodeToString(mac.Sum(nil))
}

func (m *memConversations) ListInbound(ctx context.Context, q InboundQuery) ([]InboundItem, string, error) {
	m.gotQuery = q
	if m.failWith != nil {
		return nil, "", m.failWith
	}
	var out []InboundItem
	started := q.After == ""
	for _, it := range m.inbound {
		if !started {
			started = it.ID == q.After
			continue
		}
		if (q.Disposition == "" || it.Disposition == q.Disposition) && (q.Channel == "" || it.Channel == q.Channel) && (q.Agent == "" || it.Agent == q.Agent) {
			out = append(out, it)
		}
	}
	if len(out) > q.Limit {
		return out[:q.Limit], out[q.Limit-1].ID, nil
	}
	return out, "", nil
}

func (m *memConversations) ListConversations(ctx context.Context, q ConversationQuery) ([]ConversationItem, string, error) {
	var out []ConversationItem
	for _, c := range m.convs {
		if (q.Channel == "" || c.Channel == q.Channel) && (q.Agent == "" || c.Agent == q.Agent) {
			out = append(out, c)
		}
	}
	if len(out) > q.Limit {
		return out[:q.Limit], out[q.Limit-1].ID, nil
	}
	return out, "", nil
}

func (m *memConversations) Conversation(ctx context.Context, id string) (*ConversationDetail, error) {
	d, ok := m.details[id]
	if !ok {
		return nil, fmt.Errorf("conversation %s: %w", id, store.ErrNotFound)
	}
	cp := *d
	return &cp, nil
}

func (m *memConversations) Resolve(ctx context.Context, id string) (store.NewDelivery, error) {
	if m.failWith != nil {
		return store.NewDelivery{}, m.failWith
	}
	nd, ok := m.resolve[id]
	if !ok {
		return store.NewDelivery{}, fmt.Errorf("conversation %s: %w", id, store.ErrNotFound)
	}
	return nd, nil
}

func (m *memConversations) Transports(agent string) []Transport { return m.transport[agent] }

func (m *memConversations) OpenAttachment(ctx context.Context, inboundID string, n int, expires, sig string) (string, string, []byte, error) {
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || !hmac.Equal([]byte(sig), []byte(m.sign(inboundID, n, expires))) || m.now.Unix() > exp {
		return "", "", nil, ErrBadSignature
	}
	m.lookups++
	fs := m.files[inboundID]
	if n >= len(fs) {
		return "", "", nil, store.ErrNotFound
	}
	return fs[n][0], fs[n][1], []byte(fs[n][2]), nil
}

var _ Conversations = (*memConversations)(nil)

var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func newMemConversations() *memConversations {
	m := &memConversations{now: t0, urlKey: []byte("url-key-0123456789abcdef"),
		details: map[string]*ConversationDetail{}, resolve: map[string]store.NewDelivery{},
		files: map[string][][3]string{}, transport: map[string][]Transport{}}
	m.inbound = []InboundItem{
		{ID: "inb_3", Channel: "whatsapp", From: "+447700900123", To: "+15550002222", Text: "and a hotel?", ReceivedAt: t0.Add(3 * time.Minute),
			Disposition: envelope.DispositionTurn, Agent: "travel", ConversationID: "cnv_w", TurnID: "trn_3"},
		{ID: "inb_2", Channel: "email", From: "mallory@evil.example", To: "travel@example.org", Subject: "hi", ReceivedAt: t0.Add(2 * time.Minute),
			Disposition: envelope.DispositionRejected, Reason: "sender not allowed", Agent: "travel"},
		{ID: "inb_1", Channel: "email", From: "alice@example.org", To: "travel@example.org", Subject: "Flights to Lisbon", Text: "Any flights?",
			Attachments: []AttachmentItem{{Filename: "itinerary.pdf", MediaType: "application/pdf", Size: 5}}, ReceivedAt: t0.Add(time.Minute),
			Disposition: envelope.DispositionTurn, Agent: "travel", ConversationID: "cnv_e", TurnID: "trn_1"},
	}
	m.convs = []ConversationItem{
		{ID: "cnv_w", Agent: "travel", Channel: "whatsapp", OurAddress: "+15550002222", Participants: []string{"+447700900123"}, CreatedAt: t0, UpdatedAt: t0.Add(3 * time.Minute), LastInboundAt: t0.Add(3 * time.Minute), Turns: 1},
		{ID: "cnv_e", Agent: "travel", Channel: "email", OurAddress: "travel@example.org", Participants: []string{"alice@example.org"}, Subject: "Flights to Lisbon", CreatedAt: t0, UpdatedAt: t0.Add(2 * time.Minute), LastInboundAt: t0.Add(time.Minute), Turns: 1},
	}
	m.details["cnv_e"] = &ConversationDetail{Conversation: m.convs[1], Messages: []Message{
		{At: t0.Add(time.Minute), Direction: "in", InboundID: "inb_1", Text: "Any flights?", State: envelope.DispositionTurn},
		{At: t0.Add(2 * time.Minute), Direction: "out", DeliveryID: "dlv_1", Text: "Two flights tomorrow.", State: "sent"},
	}}
	m.details["cnv_w"] = &ConversationDetail{Conversation: m.convs[0], Messages: []Message{
		{At: t0.Add(3 * time.Minute), Direction: "in", InboundID: "inb_3", Text: "and a hotel?", State: envelope.DispositionTurn},
		{At: t0.Add(4 * time.Minute), Direction: "out", DeliveryID: "dlv_2", Text: "Hotel Lisboa.", State: "held"},
	}, Window: &Window{Open: false, ClosesAt: t0.Add(-time.Hour)}}
	m.resolve["cnv_e"] = store.NewDelivery{Channel: "email", To: "alice@example.org", Extra: map[string]string{
		envelope.ExtraConversation: "cnv_e", envelope.ExtraFrom: "travel@example.org", envelope.ExtraSubject: "Re: Flights to Lisbon",
		envelope.ExtraInReplyTo: "<m1@example.org>", envelope.ExtraReferences: "<m1@example.org>"}}
	m.resolve["cnv_s"] = store.NewDelivery{Channel: "sms", To: "+447700900123", Extra: map[string]string{
		envelope.ExtraConversation: "cnv_s", envelope.ExtraFrom: "+15550001111"}}
	m.files["inb_1"] = [][3]string{{"../../etc/\"passwd\r\n.pdf", "application/pdf; name=x", "%PDF-"}, {"räksmörgås.html", "text/html", "<script>alert(1)</script>"}, {"", "not a type", "raw"}}
	m.transport["travel"] = []Transport{{"smtp", "mailto:travel@example.org"}, {"sms", "sms:+15550001111"}, {"whatsapp", "whatsapp:+15550002222"}}
	return m
}

// newConvServer serves the API with conversations (m) or without (nil).
func newConvServer(t *testing.T, m *memConversations) (*httptest.Server, *bolt.DB) {
	t.Helper()
	db := storetest.Open(t, bolt.Options{})
	agents := map[string]bool{"travel": true, "quiet": true}
	cfg := IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true, "sms": true, "whatsapp": true, "webhook": true},
		Endpoints: map[string]bool{"ops": true}, Agents: agents}
	var routes []Route
	if m != nil {
		cfg.Conversations = m
		routes = ConversationRoutes(m, agents, nil)
	}
	s, err := New(Config{APIKeys: []string{key}, ReadKeys: []string{readKey}}, db, NewIngester(cfg, db, nil, nil, nil), nil, nil, nil, routes)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, db
}

func problemPaths(out map[string]any) []string {
	var paths []string
	ps, _ := out["problems"].([]any)
	for _, p := range ps {
		paths = append(paths, fmt.Sprint(p.(map[string]any)["path"]))
	}
	return paths
}

func TestInboundList(t *testing.T) {
	m := newMemConversations()
	srv, _ := newConvServer(t, m)
	code, out := do(t, srv, "GET", "/v1/inbound", readKey, "")
	if code != 200 {
		t.Fatalf("status %d: %v", code, out)
	}
	items := out["inbound"].([]any)
	if len(items) != 3 || items[0].(map[string]any)["id"] != "inb_3" || out["next"] != nil {
		t.Fatalf("inbound = %v", out)
	}
	first := items[2].(map[string]any)
	if first["conversationId"] != "cnv_e" || first["receivedAt"] != "2026-11-24T09:01:00Z" || first["attachments"].([]any)[0].(map[string]any)["mediaType"] != "application/pdf" {
		t.Fatalf("camelCase view: %v", first)
	}
	code, out = do(t, srv, "GET", "/v1/inbound?disposition=turn&channel=email&agent=travel&limit=5", key, "")
	if code != 200 || len(out["inbound"].([]any)) != 1 || m.gotQuery != (InboundQuery{Disposition: "turn", Channel: "email", Agent: "travel", Limit: 5}) {
		t.Fatalf("filtered: %d %v, query %+v", code, out, m.gotQuery)
	}
	// Pages: the cursor of one page is the after of the next.
	code, out = do(t, srv, "GET", "/v1/inbound?limit=2", key, "")
	if code != 200 || len(out["inbound"].([]any)) != 2 || out["next"] != "inb_2" {
		t.Fatalf("page 1: %v", out)
	}
	code, out = do(t, srv, "GET", "/v1/inbound?limit=2&after=inb_2", key, "")
	if code != 200 || len(out["inbound"].([]any)) != 1 || out["inbound"].([]any)[0].(map[string]any)["id"] != "inb_1" || out["next"] != nil {
		t.Fatalf("page 2: %v", out)
	}
	// Nothing matches: an empty list, not null.
	code, out = do(t, srv, "GET", "/v1/inbound?disposition=duplicate", key, "")
	if code != 200 || out["inbound"] == nil || len(out["inbound"].([]any)) != 0 {
		t.Fatalf("empty: %d %v", code, out)
	}
}

func TestInboundListBadParameters(t *testing.T) {
	srv, _ := newConvServer(t, newMemConversations())
	long := strings.Repeat("a", 257)
	for _, tc := range []struct{ query, path string }{
		{"disposition=approved", "disposition"},
		{"channel=webhook", "channel"},
		{"channel=fax", "channel"},
		{"agent=nobody", "agent"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"after=a%20b", "after"},
		{"after=" + long, "after"},
		{"state=dead", "state"},
		{"limit=1&limit=2", "limit"},
	} {
		code, out := do(t, srv, "GET", "/v1/inbound?"+tc.query, key, "")
		if code != 400 || len(problemPaths(out)) != 1 || problemPaths(out)[0] != tc.path {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.query, code, out, tc.path)
		}
	}
	// Two bad parameters: both named.
	code, out := do(t, srv, "GET", "/v1/inbound?disposition=x&limit=0", key, "")
	if code != 400 || len(problemPaths(out)) != 2 {
		t.Fatalf("two problems: %d %v", code, out)
	}
}

func TestConversationsEndpointsNeedAKey(t *testing.T) {
	srv, _ := newConvServer(t, newMemConversations())
	for _, p := range []string{"/v1/inbound", "/v1/conversations", "/v1/conversations/cnv_e", "/v1/agents/travel/transports"} {
		if code, _ := do(t, srv, "GET", p, "", ""); code != 401 {
			t.Errorf("%s without a key: %d", p, code)
		}
		if code, _ := do(t, srv, "GET", p, "wrong-key-0123456789", ""); code != 401 {
			t.Errorf("%s with a wrong key: %d", p, code)
		}
		if code, _ := do(t, srv, "GET", p, readKey, ""); code != 200 {
			t.Errorf("%s with a read-only key: %d", p, code)
		}
	}
	// A read-only key still cannot send to a conversation.
	if code, _ := do(t, srv, "POST", "/v1/deliveries", readKey, request(`[{"conversation":"cnv_e"}]`)); code != 403 {
		t.Fatalf("read-only ingest: %d", code)
	}
}

func TestConversationsList(t *testing.T) {
	srv, _ := newConvServer(t, newMemConversations())
	code, out := do(t, srv, "GET", "/v1/conversations", key, "")
	if code != 200 || len(out["conversations"].([]any)) != 2 {
		t.Fatalf("list: %d %v", code, out)
	}
	c := out["conversations"].([]any)[1].(map[string]any)
	if c["ourAddress"] != "travel@example.org" || c["participants"].([]any)[0] != "alice@example.org" || c["lastInboundAt"] != "2026-11-24T09:01:00Z" {
		t.Fatalf("view: %v", c)
	}
	code, out = do(t, srv, "GET", "/v1/conversations?channel=whatsapp&agent=travel&limit=1", key, "")
	if code != 200 || len(out["conversations"].([]any)) != 1 || out["conversations"].([]any)[0].(map[string]any)["id"] != "cnv_w" {
		t.Fatalf("filtered: %d %v", code, out)
	}
	for _, tc := range []struct{ query, path string }{
		{"channel=webhook", "channel"}, {"agent=nobody", "agent"}, {"limit=-1", "limit"}, {"disposition=turn", "disposition"},
	} {
		code, out := do(t, srv, "GET", "/v1/conversations?"+tc.query, key, "")
		if code != 400 || len(problemPaths(out)) != 1 || problemPaths(out)[0] != tc.path {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.query, code, out, tc.path)
		}
	}
}

func TestConversationDetail(t *testing.T) {
	srv, _ := newConvServer(t, newMemConversations())
	code, out := do(t, srv, "GET", "/v1/conversations/cnv_w", key, "")
	if code != 200 {
		t.Fatalf("status %d: %v", code, out)
	}
	msgs := out["messages"].([]any)
	if len(msgs) != 2 || msgs[0].(map[string]any)["direction"] != "in" || msgs[1].(map[string]any)["direction"] != "out" ||
		msgs[1].(map[string]any)["state"] != "held" || msgs[1].(map[string]any)["deliveryId"] != "dlv_2" {
		t.Fatalf("messages: %v", msgs)
	}
	win := out["window"].(map[string]any)
	if win["open"] != false || win["closesAt"] != "2026-11-24T08:00:00Z" || out["conversation"].(map[string]any)["channel"] != "whatsapp" {
		t.Fatalf("window and binding: %v", out)
	}
	// Email has no window.
	if code, out = do(t, srv, "GET", "/v1/conversations/cnv_e", key, ""); code != 200 || out["window"] != nil {
		t.Fatalf("email: %d %v", code, out)
	}
	for _, id := range []string{"cnv_nope", "dlv_1", "cnv_", "cnv_%2e%2e", "cnv_" + strings.Repeat("x", 80)} {
		if code, out := do(t, srv, "GET", "/v1/conversations/"+id, key, ""); code != 404 {
			t.Errorf("%s: %d %v", id, code, out)
		}
	}
}

func TestAgentTransports(t *testing.T) {
	srv, _ := newConvServer(t, newMemConversations())
	code, out := do(t, srv, "GET", "/v1/agents/travel/transports", key, "")
	ts, _ := out["transports"].([]any)
	if code != 200 || len(ts) != 3 || ts[0].(map[string]any)["protocol"] != "smtp" || ts[0].(map[string]any)["url"] != "mailto:travel@example.org" {
		t.Fatalf("transports: %d %v", code, out)
	}
	// A known agent without inbound addresses: an empty list.
	if code, out = do(t, srv, "GET", "/v1/agents/quiet/transports", key, ""); code != 200 || out["transports"] == nil || len(out["transports"].([]any)) != 0 {
		t.Fatalf("quiet: %d %v", code, out)
	}
	if code, out = do(t, srv, "GET", "/v1/agents/nobody/transports", key, ""); code != 404 {
		t.Fatalf("unknown agent: %d %v", code, out)
	}
}

// get fetches a path without a key and returns the response and its body.
func get(t *testing.T, srv *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestAttachmentSignedURL(t *testing.T) {
	m := newMemConversations()
	srv, _ := newConvServer(t, m)
	exp := strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)
	link := func(id string, n int, expires, sig string) string {
		return fmt.Sprintf("/v1/inbound/%s/attachments/%d?%s", id, n, url.Values{"expires": {expires}, "sig": {sig}}.Encode())
	}
	// A good signature, no API key: the bytes, as a download.
	resp, body := get(t, srv, link("inb_1", 0, exp, m.sign("inb_1", 0, exp)))
	if resp.StatusCode != 200 || body != "%PDF-" {
		t.Fatalf("download: %d %q", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/pdf" {
		t.Errorf("Content-Type %q", ct)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("headers %v", resp.Header)
	}
	disp, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	if err != nil || disp != "attachment" || params["filename"] != "_passwd.pdf" {
		t.Errorf("Content-Disposition %q: %v %v", resp.Header.Get("Content-Disposition"), params, err)
	}
	// A non-ASCII name survives (RFC 2231 encoding), HTML is still a download.
	resp, _ = get(t, srv, link("inb_1", 1, exp, m.sign("inb_1", 1, exp)))
	_, params, _ = mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	if resp.StatusCode != 200 || params["filename"] != "räksmörgås.html" || resp.Header.Get("Content-Type") != "text/html" {
		t.Errorf("html attachment: %d %v %v", resp.StatusCode, resp.Header, params)
	}
	// No name, a broken type: "attachment", application/octet-stream.
	resp, _ = get(t, srv, link("inb_1", 2, exp, m.sign("inb_1", 2, exp)))
	_, params, _ = mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	if resp.Header.Get("Content-Type") != "application/octet-stream" || params["filename"] != "attachment" {
		t.Errorf("fallbacks: %v", resp.Header)
	}
	// A good signature for an attachment that is gone: 404.
	if resp, _ = get(t, srv, link("inb_1", 7, exp, m.sign("inb_1", 7, exp))); resp.StatusCode != 404 {
		t.Errorf("gone: %d", resp.StatusCode)
	}
	before := m.lookups
	past := strconv.FormatInt(t0.Add(-time.Second).Unix(), 10)
	forbidden := map[string]string{
		"wrong signature":          link("inb_1", 0, exp, m.sign("inb_1", 1, exp)),
		"expired":                  link("inb_1", 0, past, m.sign("inb_1", 0, past)),
		"expiry moved":             link("inb_1", 0, exp+"0", m.sign("inb_1", 0, exp)),
		"no signature":             fmt.Sprintf("/v1/inbound/inb_1/attachments/0?expires=%s", exp),
		"no expiry":                fmt.Sprintf("/v1/inbound/inb_1/attachments/0?sig=%s", m.sign("inb_1", 0, exp)),
		"two signatures":           link("inb_1", 0, exp, m.sign("inb_1", 0, exp)) + "&sig=x",
		"expiry not a number":      link("inb_1", 0, "soon", m.sign("inb_1", 0, "soon")),
		"signature too long":       link("inb_1", 0, exp, strings.Repeat("a", 129)),
		"another record":           link("inb_2", 0, exp, m.sign("inb_1", 0, exp)),
		"not an inbound id":        link("dlv_1", 0, exp, m.sign("dlv_1", 0, exp)),
		"index out of bounds":      fmt.Sprintf("/v1/inbound/inb_1/attachments/99999?expires=%s&sig=%s", exp, m.sign("inb_1", 99999, exp)),
		"index not a number":       fmt.Sprintf("/v1/inbound/inb_1/attachments/x?expires=%s&sig=%s", exp, m.sign("inb_1", 0, exp)),
		"an API key, no signature": "/v1/inbound/inb_1/attachments/0",
	}
	var firstBody string
	for name, p := range forbidden {
		req, _ := http.NewRequest("GET", srv.URL+p, nil)
		if name == "an API key, no signature" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
		// One answer for every reason.
		if firstBody == "" {
			firstBody = string(b)
		} else if string(b) != firstBody {
			t.Errorf("%s: body %q differs from %q", name, b, firstBody)
		}
	}
	if m.lookups != before {
		t.Fatalf("%d lookups past a bad signature", m.lookups-before)
	}
}

func TestSanitizeFilename(t *testing.T) {
	for in, want := range map[string]string{
		"report.pdf":                 "report.pdf",
		"../../etc/passwd":           "passwd",
		`C:\Users\me\evil.exe`:       "evil.exe",
		".htaccess":                  "htaccess",
		"a\"b;c.txt":                 "a_b_c.txt",
		"bill\u202Efdp.exe":          "billfdp.exe",
		"line\r\nbreak.txt":          "linebreak.txt",
		"":                           "attachment",
		"...":                        "attachment",
		"/":                          "attachment",
		"tab\there.txt":              "tabhere.txt",
		"Grüße.txt":                  "Grüße.txt",
		strings.Repeat("é", 300):     strings.Repeat("é", maxFilenameRunes),
		"name\xff\xfe.txt":           "name.txt",
		"what?<is>this*|:.txt":       "what__is_this___.txt",
		"trailing. ":                 "trailing",
		"  spaced  name  .pdf":       "spaced  name  .pdf",
		"nul\x00byte.bin":            "nulbyte.bin",
		"zero\u200Bwidth.txt":        "zerowidth.txt",
		"sep\u2028arator.txt":        "separator.txt",
		"folder/sub/../final.tar.gz": "final.tar.gz",
	} {
		if got := SanitizeFilename(in); got != want {
			t.Errorf("SanitizeFilename(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSanitizeFilename(f *testing.F) {
	for _, s := range []string{"a.pdf", "../x", "\u202e", "\"", "é", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := SanitizeFilename(in)
		if out == "" || strings.ContainsAny(out, "/\\\"\r\n\x00;") || strings.HasPrefix(out, ".") || len([]rune(out)) > maxFilenameRunes {
			t.Fatalf("SanitizeFilename(%q) = %q", in, out)
		}
		v := mime.FormatMediaType("attachment", map[string]string{"filename": out})
		if _, params, err := mime.ParseMediaType(v); err != nil || params["filename"] != out {
			t.Fatalf("%q does not round-trip through Content-Disposition: %q %v %v", out, v, params, err)
		}
	})
}

func FuzzParseInboundQuery(f *testing.F) {
	for _, s := range []string{"disposition=turn&limit=5", "limit=0", "after=inb_1&agent=travel", "x=1", "limit=1&limit=2", "%zz"} {
		f.Add(s)
	}
	agents := map[string]bool{"travel": true}
	f.Fuzz(func(t *testing.T, raw string) {
		vals, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseInboundQuery(vals, agents)
		if err != nil {
			var ve *envelope.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("%q: %v is not a validation error with problems", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > maxListLimit || (q.Agent != "" && !agents[q.Agent]) || len(q.After) > maxParamLen ||
			(q.Disposition != "" && !contains(Dispositions, q.Disposition)) || (q.Channel != "" && !contains(InboundChannels, q.Channel)) {
			t.Fatalf("%q accepted as %+v", raw, q)
		}
	})
}

func TestIngestToConversation(t *testing.T) {
	m := newMemConversations()
	srv, db := newConvServer(t, m)
	ctx := context.Background()
	code, out := do(t, srv, "POST", "/v1/deliveries", key, request(`[{"conversation":"cnv_e"},{"conversation":"cnv_s"},{"channel":"email","address":"bob@example.org"}]`))
	if code != 202 {
		t.Fatalf("status %d: %v", code, out)
	}
	ds := out["deliveries"].([]any)
	if len(ds) != 3 || ds[0].(map[string]any)["to"] != "alice@example.org" || ds[0].(map[string]any)["channel"] != "email" ||
		ds[1].(map[string]any)["channel"] != "sms" || ds[1].(map[string]any)["to"] != "+447700900123" {
		t.Fatalf("deliveries = %v", ds)
	}
	d, err := db.Delivery(ctx, ds[0].(map[string]any)["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if d.Extra[envelope.ExtraConversation] != "cnv_e" || d.Extra[envelope.ExtraSubject] != "Re: Flights to Lisbon" || d.Extra[envelope.ExtraInReplyTo] != "<m1@example.org>" {
		t.Fatalf("extra of the conversation delivery: %v", d.Extra)
	}
	plain, _ := db.Delivery(ctx, ds[2].(map[string]any)["id"].(string))
	if len(plain.Extra) != 0 {
		t.Fatalf("the ordinary recipient got extra keys: %v", plain.Extra)
	}
	// A conversation and the address it resolves to are one recipient.
	code, out = do(t, srv, "POST", "/v1/deliveries", key, request(`[{"conversation":"cnv_e"},{"channel":"email","address":"alice@example.org"}]`))
	if code != 400 || problemPaths(out)[0] != "to[1]" {
		t.Fatalf("duplicate: %d %v", code, out)
	}
}

func TestIngestToConversationRefused(t *testing.T) {
	m := newMemConversations()
	srv, db := newConvServer(t, m)
	for _, tc := range []struct {
		name, to string
		code     int
		path     string
	}{
		{"unknown", `[{"channel":"email","address":"bob@example.org"},{"conversation":"cnv_nope"}]`, 422, "to[1].conversation"},
		{"not an id", `[{"conversation":"../cnv"}]`, 422, "to[0].conversation"},
		{"both", `[{"conversation":"cnv_e","channel":"email","address":"alice@example.org"}]`, 422, "to[0]"},
		{"conversation and endpoint", `[{"conversation":"cnv_e","endpoint":"ops"}]`, 422, "to[0]"},
		// With another problem in the request, every problem is named: 400.
		{"unknown and a bad address", `[{"conversation":"cnv_nope"},{"channel":"email","address":"not an address"}]`, 400, "to[0].conversation"},
	} {
		code, out := do(t, srv, "POST", "/v1/deliveries", key, request(tc.to))
		if code != tc.code || len(problemPaths(out)) == 0 || problemPaths(out)[0] != tc.path {
			t.Errorf("%s: %d %v, want %d naming %s", tc.name, code, out, tc.code, tc.path)
		}
	}
	if n, err := db.CountByState(context.Background()); err != nil || len(n) != 0 {
		t.Fatalf("refused requests stored deliveries: %v %v", n, err)
	}
	// A failing resolver is the server's fault, not the caller's.
	m.failWith = errors.New("disk on fire")
	if code, out := do(t, srv, "POST", "/v1/deliveries", key, request(`[{"conversation":"cnv_e"}]`)); code != 500 {
		t.Fatalf("resolver failure: %d %v", code, out)
	}
}

func TestIngestToConversationDisabled(t *testing.T) {
	srv, _ := newConvServer(t, nil)
	code, out := do(t, srv, "POST", "/v1/deliveries", key, request(`[{"conversation":"cnv_e"}]`))
	ps, _ := out["problems"].([]any)
	if code != 422 || len(ps) != 1 || ps[0].(map[string]any)["reason"] != "conversations are not enabled" {
		t.Fatalf("%d %v", code, out)
	}
	// And the conversation routes are not served.
	if code, _ := do(t, srv, "GET", "/v1/conversations", key, ""); code != 404 {
		t.Fatalf("routes without conversations: %d", code)
	}
}

// The conversation routes live beside the provider webhooks under
// /v1/inbound and the agent routes under /v1/agents: the mux takes them
// all, and each request goes where it should.
func TestConversationRoutesBesideTheOthers(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	m := newMemConversations()
	hit := ""
	mark := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit = name })
	}
	routes := append(ConversationRoutes(m, map[string]bool{"travel": true}, nil),
		Route{Method: "POST", Pattern: "/v1/inbound/twilio", Handler: mark("twilio")},
		Route{Method: "POST", Pattern: "/v1/inbound/webhook/{endpoint}", Handler: mark("webhook")})
	routes = append(routes, AgentRoutes(nil, nil)...)
	s, err := New(Config{APIKeys: []string{key}}, db, NewIngester(IngestConfig{Registry: envelope.NewRegistry()}, db, nil, nil, nil), nil, nil, nil, routes)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for path, want := range map[string]string{"/v1/inbound/twilio": "twilio", "/v1/inbound/webhook/ops": "webhook"} {
		hit = ""
		if code, _ := do(t, srv, "POST", path, "", ""); code != 200 || hit != want {
			t.Errorf("POST %s: %d reached %q", path, code, hit)
		}
	}
	if code, out := do(t, srv, "GET", "/v1/agents/travel/transports", key, ""); code != 200 || len(out["transports"].([]any)) != 3 {
		t.Errorf("transports: %d %v", code, out)
	}
}
