package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/channels/slack"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/schedule"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// Fixtures: a real store with deliveries in every state, and hand-written
// fakes of the services (their own packages test them; here only what the
// console shows and asks of them matters).

const (
	fullKey = "full-key-0123456789abcdef"
	readKey = "read-key-0123456789abcdef"
)

type fakeApprovals struct {
	mu      sync.Mutex
	views   map[string]*approvals.View
	decided []string
	retried []string
}

func (f *fakeApprovals) List(ctx context.Context, state, after string, limit int) ([]*approvals.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*approvals.View
	for _, v := range f.views {
		if v.State == state {
			out = append(out, v)
		}
	}
	return out, nil
}

func (f *fakeApprovals) ListByInjection(ctx context.Context, state string, limit int) ([]*approvals.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*approvals.View
	for _, v := range f.views {
		if v.Injection != nil && v.Injection.State == state {
			out = append(out, v)
		}
	}
	return out, nil
}

func (f *fakeApprovals) Get(ctx context.Context, id string) (*approvals.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.views[id]; ok {
		return v, nil
	}
	return nil, store.ErrNotFound
}

func (f *fakeApprovals) Decide(ctx context.Context, id, decision, reason, keyID string) (*approvals.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.views[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	if v.State != store.ApprovalPending {
		return nil, store.ErrAlreadyDecided
	}
	v.State, v.Reason, v.DecidedBy, v.DecidedAt = decision, reason, "operator:"+keyID, time.Now()
	f.decided = append(f.decided, id+":"+decision+":"+reason)
	return v, nil
}

func (f *fakeApprovals) RetryInjection(ctx context.Context, id string) (*store.Injection, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retried = append(f.retried, id)
	return &store.Injection{ApprovalID: id, State: "pending"}, nil
}

// fixtureTrail seals events into a trail as the store appends them, then
// lets tamper change them as someone with the database could, and verifies
// the result as approvals.Service.Trail does.
func fixtureTrail(id string, tamper func([]store.ApprovalEvent), events ...store.ApprovalEvent) *approvals.Trail {
	var head store.ApprovalEventHead
	var out []store.ApprovalEvent
	for _, e := range events {
		e, err := store.SealApprovalEvent(e, head, e.At)
		if err != nil {
			panic(err)
		}
		head = store.ApprovalEventHead{Seq: e.Seq, Hash: e.Hash}
		out = append(out, e)
	}
	if tamper != nil {
		tamper(out)
	}
	tr := &approvals.Trail{ApprovalID: id, Events: out, Head: head}
	if err := approvals.VerifyHead(out, head); err != nil {
		tr.Problem = err.(*approvals.ChainError)
	}
	return tr
}

type fakeSchedules struct {
	runs    []string
	paused  map[string]string // name → by whom
	resumed int
}

func (f *fakeSchedules) List(ctx context.Context) ([]schedule.Status, error) {
	now := time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)
	last := schedule.RunView{ID: "r1", ScheduleRun: store.ScheduleRun{Schedule: "morning-brief", Slot: now.Add(-19 * time.Hour),
		Trigger: "cron", State: "succeeded", EnvelopeID: "env_1", AnsweredBy: "push"}}
	out := []schedule.Status{
		{Name: "morning-brief", Cron: "0 7 * * *", TimeZone: "Europe/London", Agent: "travel", Enabled: true, Next: now.Add(5 * time.Hour), Last: &last, LastOutcome: "succeeded"},
		{Name: "weekly-report", Cron: "0 9 * * MON", Agent: "travel", Enabled: false},
	}
	for i := range out {
		if by, ok := f.paused[out[i].Name]; ok {
			out[i].Paused, out[i].PausedAt, out[i].PausedBy, out[i].Next = true, now.Add(-time.Hour), by, time.Time{}
		}
	}
	return out, nil
}

func (f *fakeSchedules) Pause(ctx context.Context, name, by string) (schedule.Status, error) {
	if name != "morning-brief" && name != "weekly-report" {
		return schedule.Status{}, schedule.ErrUnknownSchedule
	}
	if f.paused == nil {
		f.paused = map[string]string{}
	}
	f.paused[name] = by
	return schedule.Status{Name: name, Paused: true, PausedBy: by}, nil
}

func (f *fakeSchedules) Resume(ctx context.Context, name, by string) (schedule.Status, error) {
	if name != "morning-brief" && name != "weekly-report" {
		return schedule.Status{}, schedule.ErrUnknownSchedule
	}
	if _, ok := f.paused[name]; ok {
		delete(f.paused, name)
		f.resumed++
	}
	return schedule.Status{Name: name}, nil
}

func (f *fakeSchedules) RunNow(ctx context.Context, name string) (store.ScheduleRun, error) {
	if name != "morning-brief" && name != "weekly-report" {
		return store.ScheduleRun{}, schedule.ErrUnknownSchedule
	}
	f.runs = append(f.runs, name)
	return store.ScheduleRun{Schedule: name, Trigger: "manual", State: "running"}, nil
}

type fakeWebhooks struct {
	mu       sync.Mutex
	disabled map[string]bool
}

func (f *fakeWebhooks) Endpoints() []webhook.EndpointStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []webhook.EndpointStatus{{Name: "dev-sink", Breaker: webhook.Closed},
		{Name: "partner-crm", Breaker: webhook.Open, Disabled: f.disabled["partner-crm"], DisabledAt: time.Now()}}
}

func (f *fakeWebhooks) URL(name string) string {
	return map[string]string{"dev-sink": "http://127.0.0.1:8025/dev/sink",
		"partner-crm": "https://bot:hunter2@crm.partner.example/hooks/beachd-notifications?tenant=acme&access_token=abcDEF1234567890xyz&sig=x#frag"}[name]
}

func (f *fakeWebhooks) Enable(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "dev-sink" && name != "partner-crm" {
		return false
	}
	delete(f.disabled, name)
	return true
}

type fakeEnqueuer struct{ n int }

func (f *fakeEnqueuer) Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source string) (string, error) {
	f.n++
	return "env_test", nil
}

type fakeRenditions struct{}

func (fakeRenditions) Render(ctx context.Context, d *store.Delivery) (*Rendition, error) {
	switch d.Channel {
	case "email":
		return &Rendition{Subject: "Your flights", HTML: `<p style="color:#18181b">Two flights <script>alert(1)</script></p>`, Text: "Two flights", MIME: []byte("Subject: Your flights\r\n\r\nTwo flights\r\n")}, nil
	case "sms":
		return &Rendition{Text: "Two flights: EJ4521 £94, BA2043 £187", Facts: []Fact{{"Encoding", "UCS-2"}, {"Segments", "1"}}}, nil
	}
	return nil, errors.New("no preview")
}

type fakeDev struct{ replies []string }

func (f *fakeDev) Texts() []DevText {
	return []DevText{{Channel: "sms", To: "+15555550100", Body: "Approve booking BA2043? Reply YES 123456 or NO 123456", At: time.Now()},
		{Channel: "whatsapp", To: "+15555550101", Body: "Approve booking BA2043?", Buttons: []DevButton{{"Approve", "p1"}, {"Deny", "p2"}}, At: time.Now()}}
}
func (f *fakeDev) Webhooks() []DevWebhook {
	return []DevWebhook{{ID: "msg_1", Type: "beach.envelope", Verified: true, At: time.Now(), Text: "I found two direct flights"}}
}
func (f *fakeDev) AgentReceived() []DevDecision {
	return []DevDecision{{ApprovalID: "appr_done", Decision: "granted", DecidedBy: "you@beachd.localhost", At: time.Now()}}
}
func (f *fakeDev) Mail() DevMail {
	at := time.Date(2026, 11, 24, 1, 30, 0, 0, time.UTC)
	return DevMail{Lines: []string{"mail: SMTP 127.0.0.1:2525, IMAP 127.0.0.1:1143"}, Received: 3, Messages: []DevMailMessage{
		{At: at, Mailboxes: []string{"agent"}, From: "you@beachd.localhost", To: []string{"agent@beachd.localhost"},
			Subject: "Flights to Lisbon", Text: "Any flights on Friday?"},
		{At: at.Add(time.Minute), Mailboxes: []string{"you"}, From: "agent@beachd.localhost", To: []string{"you@beachd.localhost"},
			Subject: `Approve: <script>alert("subject")</script> Book BA2043 [approval:b6g4ybckegghtlujhznoi5gb5y]`, ReplyTo: "agent+tok_reply0123456789@beachd.localhost", DeliveryID: "dlv_mail1",
			Text: "Book BA2043 for 6 people?\n\nReply YES 482193 or open this page: http://beachd.test/a/tok_abcdefghijklmnop\n" +
				"Not ours: http://evil.example/a/tok_abcdefghijklmnop\n<img src=x onerror=alert(1)>"},
	}}
}
func (f *fakeDev) SlackMessages() []DevSlackMessage {
	at := time.Date(2026, 11, 24, 1, 40, 0, 0, time.UTC)
	return []DevSlackMessage{
		{DeliveryID: "dlv_slack1", Channel: "D012AB3CD", TS: "1795484400.000001", To: "U012AB3CD", At: at,
			Text:    "Approval needed: Book BA2043 for 6 people, £1,122 <script>alert(3)</script>",
			Buttons: []DevSlackButton{{"Approve", "beachd_approve", "appr_1:n0nce"}, {"Deny", "beachd_deny", "appr_1:n0nce2"}}},
		{DeliveryID: "dlv_slack2", Channel: "D012AB3CD", TS: "1795484400.000002", To: "U012AB3CD", At: at.Add(time.Minute), UpdatedAt: at.Add(2 * time.Minute),
			Text: "*Denied* by U012AB3CD (slack) on Tue 24 Nov 2026, 01:42 UTC: Book BA2044"},
		{Channel: "D012AB3CD", User: "U0MALLORY", Ephemeral: true, To: "U0MALLORY", At: at.Add(3 * time.Minute), Text: "This request is not yours to decide."},
		{DeliveryID: "dlv_slack3", Channel: "C0TRAVEL", TS: "1795484400.000004", ThreadTS: "1795484400.000003", To: "C0TRAVEL", At: at.Add(4 * time.Minute),
			Text: "Two direct flights to Lisbon on Friday: 07:10 and 09:40."},
	}
}
func (f *fakeDev) SlackWrite(ctx context.Context, user, channel, threadTS, text string) (string, error) {
	f.replies = append(f.replies, "slack:"+user+":"+channel+":"+threadTS+":"+text)
	return threadTS, nil
}
func (f *fakeDev) SlackClick(ctx context.Context, user, channel, action, value string) error {
	f.replies = append(f.replies, "click:"+user+":"+channel+":"+action+":"+value)
	return nil
}

// fakeSlack is a Slack app whose token Slack refuses, with scopes missing.
type fakeSlack struct{}

func (fakeSlack) SlackStatus(context.Context) SlackStatus {
	at := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	return SlackStatus{Configured: true, InteractionsURL: "http://beachd.test/v1/inbound/slack/interactions",
		EventsURL: "http://beachd.test/v1/inbound/slack/events", Conversations: []string{"travel: im, C0TRAVEL"},
		Health: slack.HealthStatus{Self: slack.Identity{UserID: "U0BEACHD1", BotID: "B0BEACHD1", TeamID: "T0BEACHD1"}, Team: "Beach Travel",
			URL: "https://beach-travel.slack.com/", Scopes: []string{"chat:write", "im:write", "users:read"}, ScopesAt: at,
			Problem: "token_revoked: the bot token was revoked", ProblemAt: at.Add(30 * time.Minute)}}
}

func (f *fakeDev) Reply(ctx context.Context, channel, from, body, payload string) error {
	f.replies = append(f.replies, channel+":"+from+":"+body)
	return nil
}

type fixture struct {
	t     *testing.T
	c     *Console
	srv   *httptest.Server
	db    *bolt.DB
	appr  *fakeApprovals
	sched *fakeSchedules
	hooks *fakeWebhooks
	enq   *fakeEnqueuer
	dev   *fakeDev
	conv  *fakeConversations
	dead  []string
	sent  map[string]string // channel → a sent delivery id
	woke  int
}

func newFixture(t *testing.T, publicURL string) *fixture {
	t.Helper()
	db := storetest.Open(t, bolt.Options{})
	f := &fixture{t: t, db: db, sent: map[string]string{}, sched: &fakeSchedules{}, enq: &fakeEnqueuer{}, dev: &fakeDev{}, conv: &fakeConversations{},
		hooks: &fakeWebhooks{disabled: map[string]bool{"partner-crm": true}}}
	ctx := context.Background()
	env := json.RawMessage(`{"role":"agent","parts":[{"text":"Two flights","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-11-24T01:00:00Z","finalizedBy":"complete"}}`)
	res, err := db.Ingest(ctx, store.Ingest{Envelope: env, Agent: "travel", Source: "api", Deliveries: []store.NewDelivery{
		{Channel: "email", To: "ann@example.org"}, {Channel: "sms", To: "+15555550100"},
		{Channel: "webhook", To: "partner-crm"}, {Channel: "webhook", To: "partner-crm"}, {Channel: "email", To: "bob@example.org"}}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := db.Claim(ctx, 10, time.Minute, nil)
	if err != nil || len(claimed) != 5 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	for _, d := range claimed {
		o := store.Outcome{State: store.StateSent, Attempt: store.Attempt{N: 1, At: time.Now(), Duration: 120 * time.Millisecond, Outcome: "sent",
			Receipt: json.RawMessage(`{"data":{"code":250,"text":"2.0.0 Ok: queued"},"meta":{"source":"smtp"}}`)}}
		if d.Channel == "webhook" {
			o = store.Outcome{State: store.StateDead, DeadReason: "the endpoint answered 410 Gone", Error: "410 Gone",
				Attempt: store.Attempt{N: 1, At: time.Now(), Duration: 40 * time.Millisecond, Outcome: "dead", Error: "410 Gone"}}
			f.dead = append(f.dead, d.ID)
		} else if d.To == "bob@example.org" {
			o = store.Outcome{State: store.StateRetrying, NextAttemptAt: time.Now().Add(time.Hour), Error: "421 try later",
				Attempt: store.Attempt{N: 1, At: time.Now(), Outcome: "retry", Error: "421 try later"}}
		} else {
			f.sent[d.Channel] = d.ID
		}
		if _, err := db.Record(ctx, d.ID, d.LeaseUntil, o); err != nil {
			t.Fatal(err)
		}
	}
	_ = res
	// Slack: a message posted, its rewrite, and one waiting out a rate limit.
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: env, Agent: "travel", Source: "api", Deliveries: []store.NewDelivery{
		{Channel: "slack", To: "U012AB3CD"}, {Channel: "slack", To: "C0TRAVEL"},
		{Channel: "slack", To: "U012AB3CD", Extra: map[string]string{"slack_update": "D012AB3CD/1795484400.000001"}}}}); err != nil {
		t.Fatal(err)
	}
	claimed, err = db.Claim(ctx, 10, time.Minute, nil)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	for i, d := range claimed {
		o := store.Outcome{State: store.StateSent, ProviderID: fmt.Sprintf("D012AB3CD/1795484400.00000%d", i+1),
			Attempt: store.Attempt{N: 1, At: time.Now(), Outcome: "sent", Receipt: json.RawMessage(`{"data":{"ok":true},"meta":{"source":"slack"}}`)}}
		if d.To == "C0TRAVEL" {
			o = store.Outcome{State: store.StateRetrying, NextAttemptAt: time.Now().Add(30 * time.Second), Error: "slack ratelimited",
				Attempt: store.Attempt{N: 1, At: time.Now(), Outcome: "retry", Error: "slack ratelimited"}}
		}
		if _, err := db.Record(ctx, d.ID, d.LeaseUntil, o); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	req, _ := json.Marshal(envelope.ApprovalRequest{ApprovalID: "appr_1", ToolName: "book_flight", Handler: "travel-booker",
		Args: map[string]any{"flightNumber": "BA2043", "passengers": float64(6), "totalPrice": map[string]any{"amount": float64(1122), "currency": "GBP"}}})
	f.appr = &fakeApprovals{views: map[string]*approvals.View{
		"appr_1": {Approval: store.Approval{ID: "appr_1", Agent: "travel", Request: req, State: store.ApprovalPending, CreatedAt: now.Add(-time.Hour),
			ExpiresAt: now.Add(3 * time.Hour), Recipients: []store.ApprovalRecipient{{Channel: "email", Address: "ann@example.org"}}},
			Summary: "Book BA2043 for 6 people, £1,122", Why: "Charges the card <script>alert(1)</script> on file; refundable for 24 hours.",
			AgentMessage: "I'm ready to book BA2043 <img src=x onerror=alert(2)> for all 6 of you.", ToolTitle: "Book a flight", Audit: []store.AuditEntry{{At: now.Add(-time.Hour), ApprovalID: "appr_1", Event: "created"}}},
		"appr_dead": {Approval: store.Approval{ID: "appr_dead", Agent: "travel", Request: req, State: store.ApprovalGranted, CreatedAt: now.Add(-2 * time.Hour),
			ExpiresAt: now.Add(time.Hour), DecidedAt: now.Add(-time.Hour), DecidedBy: "ann@example.org", Channel: "email"},
			Summary: "Book BA2044", Injection: &store.Injection{ApprovalID: "appr_dead", State: "dead", Attempts: 9, LastError: "agent answered 404: task gone"},
			Audit: []store.AuditEntry{{At: now.Add(-time.Hour), Event: "decided", Channel: "email", Actor: "ann@example.org", Decision: "granted"},
				{At: now, Event: "injection-dead", Detail: "task gone"}},
			Trail: fixtureTrail("appr_dead", nil,
				store.ApprovalEvent{At: now.Add(-2 * time.Hour), Kind: store.EventAsked, Actor: "ann@example.org", Channel: "email"},
				store.ApprovalEvent{At: now.Add(-2 * time.Hour), Kind: store.EventAsked, Actor: "+447700900123", Channel: "sms"},
				store.ApprovalEvent{At: now.Add(-90 * time.Minute), Kind: store.EventVoted, Actor: "mallory@example.org", Channel: "email",
					Evidence: map[string]string{"decision": "granted", "disposition": "ignored", "why": "wrong-person", "senderAuth": "dmarc=pass"}},
				store.ApprovalEvent{At: now.Add(-time.Hour), Kind: store.EventVoted, Actor: "ann@example.org", Channel: "link",
					Evidence: map[string]string{"decision": "granted", "disposition": "decided", "userAgent": "<script>alert(1)</script> Mozilla/5.0 (iPhone)"}},
				store.ApprovalEvent{At: now.Add(-time.Hour), Kind: store.EventDecided, Actor: "ann@example.org", Channel: "link",
					Evidence: map[string]string{"decision": "granted"}},
				store.ApprovalEvent{At: now.Add(-50 * time.Minute), Kind: store.EventVoted, Actor: "+447700900123", Channel: "sms",
					Evidence: map[string]string{"decision": "denied", "disposition": "ignored", "why": "already-decided", "twilioSignature": "valid"}})},
		"appr_mcp": {Approval: store.Approval{ID: "appr_mcp", Agent: "travel", Request: req, Session: store.MCPSession, Turn: "appr_mcp",
			State: store.ApprovalGranted, CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(time.Hour), DecidedAt: now.Add(-time.Hour),
			DecidedBy: "+447700900123", Channel: "sms"},
			Summary:   "Book BA2046",
			Injection: &store.Injection{ApprovalID: "appr_mcp", Session: store.MCPSession, State: "done", Attempts: 1, DoneAt: now.Add(-time.Hour)},
			Trail: fixtureTrail("appr_mcp", nil,
				store.ApprovalEvent{At: now.Add(-2 * time.Hour), Kind: store.EventAsked, Actor: "+447700900123", Channel: "sms"},
				store.ApprovalEvent{At: now.Add(-time.Hour), Kind: store.EventDecided, Actor: "+447700900123", Channel: "sms",
					Evidence: map[string]string{"decision": "granted"}},
				store.ApprovalEvent{At: now.Add(-time.Hour), Kind: store.EventReturned, Actor: "mcp", Channel: "mcp",
					Evidence: map[string]string{"decision": "granted", "to": "the MCP caller (get_approval)"}})},
		"appr_ladder": {Approval: store.Approval{ID: "appr_ladder", Agent: "travel", Request: req, State: store.ApprovalPending, CreatedAt: now.Add(-3 * time.Hour),
			ExpiresAt: now.Add(21 * time.Hour), Policy: "night-bookings", Quorum: 2,
			Votes: []store.Vote{{Person: "ann@example.org", Channel: "email", Decision: "granted", At: now.Add(-150 * time.Minute)}},
			Recipients: []store.ApprovalRecipient{{Channel: "email", Address: "ann@example.org", Person: "ann@example.org"},
				{Channel: "email", Address: "bob@example.org", Person: "bob@example.org"},
				{Channel: "sms", Address: "+447700900456", Person: "+447700900456", Step: 1}}},
			Summary: "Book BA2047",
			Timers:  []store.ApprovalTimer{{ApprovalID: "appr_ladder", Kind: store.TimerRemind, Step: 1, Due: now.Add(8*time.Hour + 10*time.Minute)}},
			Trail: fixtureTrail("appr_ladder", nil,
				store.ApprovalEvent{At: now.Add(-3 * time.Hour), Kind: store.EventAsked, Actor: "ann@example.org", Channel: "email",
					Evidence: map[string]string{"policy": "night-bookings", "step": "1", "person": "ann@example.org"}},
				store.ApprovalEvent{At: now.Add(-3 * time.Hour), Kind: store.EventAsked, Actor: "bob@example.org", Channel: "email",
					Evidence: map[string]string{"policy": "night-bookings", "step": "1", "person": "bob@example.org"}},
				store.ApprovalEvent{At: now.Add(-150 * time.Minute), Kind: store.EventVoted, Actor: "ann@example.org", Channel: "email",
					Evidence: map[string]string{"decision": "granted", "disposition": "counted", "tally": "1 of 2", "senderAuth": "dmarc=pass"}},
				store.ApprovalEvent{At: now.Add(-150 * time.Minute), Kind: store.EventReminded, Actor: "bob@example.org", Channel: "email",
					Evidence: map[string]string{"policy": "night-bookings", "step": "1", "person": "bob@example.org", "delivery": "dlv_reminder"}},
				store.ApprovalEvent{At: now.Add(-time.Hour), Kind: store.EventAsked, Actor: "+447700900456", Channel: "sms",
					Evidence: map[string]string{"policy": "night-bookings", "step": "2", "person": "+447700900456", "delivery": "dlv_escalation",
						"due": now.Add(8 * time.Hour).UTC().Format(time.RFC3339)}},
				store.ApprovalEvent{At: now.Add(-time.Hour), Kind: store.EventEscalated, Actor: "policy:night-bookings",
					Evidence: map[string]string{"step": "2", "after": "2h0m0s", "people": "1"}})},
		"appr_tampered": {Approval: store.Approval{ID: "appr_tampered", Agent: "travel", Request: req, State: store.ApprovalDenied, CreatedAt: now.Add(-3 * time.Hour),
			ExpiresAt: now.Add(time.Hour), DecidedAt: now.Add(-2 * time.Hour), DecidedBy: "operator:1a2b3c4d", Channel: "operator"},
			Summary: "Book BA2045",
			Trail: fixtureTrail("appr_tampered", func(evs []store.ApprovalEvent) { evs[1].Actor = "operator:ffffffff" },
				store.ApprovalEvent{At: now.Add(-3 * time.Hour), Kind: store.EventAsked, Actor: "ann@example.org", Channel: "email"},
				store.ApprovalEvent{At: now.Add(-2 * time.Hour), Kind: store.EventDecided, Actor: "operator:1a2b3c4d", Channel: "operator",
					Evidence: map[string]string{"decision": "denied"}})},
	}}
	c, err := New(Config{Keys: []Key{{Secret: fullKey}, {Secret: readKey, ReadOnly: true}}, Secret: []byte("0123456789abcdef0123"),
		PublicURL: publicURL, Channels: []string{"email", "sms", "webhook"}},
		Deps{DB: db, Approvals: f.appr, Schedules: f.sched, Webhooks: f.hooks, Enqueuer: f.enq, Renditions: fakeRenditions{},
			Notify: func() { f.woke++ }, Dev: f.dev, Conversations: f.conv, Slack: fakeSlack{}})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	f.srv = httptest.NewServer(c)
	t.Cleanup(f.srv.Close)
	return f
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (f *fixture) get(key, path string) (int, string, http.Header) {
	f.t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

func (f *fixture) post(key, path string, form url.Values, hdr map[string]string) (int, string, http.Header) {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (f *fixture) csrf(key string) string {
	f.t.Helper()
	_, body, _ := f.get(key, "/ui/")
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		f.t.Fatalf("no CSRF token on the overview")
	}
	return m[1]
}

// screens are every page of the console with a phrase each must show.
func (f *fixture) screens() map[string]string {
	return map[string]string{
		"/ui/":                                        "dead letters",
		"/ui/deliveries":                              "partner-crm",
		"/ui/deliveries?state=dead":                   "410 Gone",
		"/ui/deliveries/" + f.sent["email"]:           "2.0.0 Ok: queued",
		"/ui/deliveries/" + f.sent["sms"]:             "UCS-2",
		"/ui/deliveries/" + f.dead[0]:                 "the endpoint answered 410 Gone",
		"/ui/retry":                                   "Died since",
		"/ui/retry?since=2020-01-01T00:00":            "<strong>2</strong> dead deliveries died since",
		"/ui/approvals":                               "2 hours 5",
		"/ui/approvals?tab=decided":                   "email reply",
		"/ui/approvals?tab=injection-dead":            "Book BA2044",
		"/ui/approvals/appr_1":                        "GBP 1,122.00",
		"/ui/approvals/appr_dead":                     "the chain is intact",
		"/ui/approvals/appr_tampered":                 "does not verify</strong> at event 2",
		"/ui/approvals/appr_mcp":                      "Returned to the MCP caller",
		"/ui/approvals/appr_ladder":                   "1 of 2 grants so far",
		"/ui/schedules":                               "morning-brief",
		"/ui/webhooks":                                "partner-crm",
		"/ui/slack":                                   "Slack refuses the bot token",
		"/ui/dev":                                     "Flights to Lisbon",
		"/ui/conversations":                           "Flights to Lisbon",
		"/ui/conversations/cnv_email1":                "Two direct flights on Friday",
		"/ui/conversations/cnv_wa1":                   "answers wait (held)",
		"/ui/inbound":                                 "sender not allowed by agents.travel.inbound.allow",
		"/ui/inbound?disposition=turn":                "passport.pdf",
		"/ui/deliveries/" + f.sent["email"] + "/mime": "Subject: Your flights",
	}
}

func TestEveryScreenRenders(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	for path, want := range f.screens() {
		code, body, h := f.get(fullKey, path)
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, want 200 with %q:\n%.2000s", path, code, want, body)
			continue
		}
		if strings.HasSuffix(path, "/mime") {
			continue
		}
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'nonce-") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: headers %v", path, h)
		}
		if regexp.MustCompile(`\son[a-z]+="`).MatchString(body) || strings.Contains(body, "<script>") {
			t.Errorf("GET %s has an inline handler or script", path)
		}
	}
	// The email's HTML is served apart, sandboxed, with no script allowed.
	code, body, h := f.get(fullKey, "/ui/deliveries/"+f.sent["email"]+"/frame")
	if code != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") || strings.Contains(h.Get("Content-Security-Policy"), "script-src") ||
		!strings.Contains(body, "Two flights") {
		t.Errorf("frame: %d %v", code, h)
	}
	// No key: a browser goes to the sign-in page, a tool gets 401.
	if code, _, h := f.get("", "/ui/deliveries"); code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ui/login") {
		t.Errorf("no session: %d %s", code, h.Get("Location"))
	}
	if code, _, _ := f.get("wrong-key-0123456789", "/ui/deliveries"); code != http.StatusUnauthorized {
		t.Errorf("wrong bearer key: %d", code)
	}
}

func TestSignInSessionCookie(t *testing.T) {
	for _, tc := range []struct {
		public string
		secure bool
	}{{"http://beachd.test", false}, {"https://beachd.example.org", true}} {
		f := newFixture(t, tc.public)
		_, page, _ := f.get("", "/ui/login")
		tok := csrfRe.FindStringSubmatch(page)[1]
		if code, _, _ := f.post("", "/ui/login", url.Values{"key": {fullKey}}, nil); code != http.StatusForbidden {
			t.Errorf("sign-in without its token: %d", code)
		}
		if code, body, _ := f.post("", "/ui/login", url.Values{"key": {"nope-0123456789abcdef"}, "csrf": {tok}}, nil); code != http.StatusUnauthorized || !strings.Contains(body, "not one of") {
			t.Errorf("wrong key: %d", code)
		}
		code, _, h := f.post("", "/ui/login", url.Values{"key": {fullKey}, "csrf": {tok}, "next": {"/ui/approvals"}}, nil)
		if code != http.StatusSeeOther || h.Get("Location") != "/ui/approvals" {
			t.Fatalf("sign-in: %d %s", code, h.Get("Location"))
		}
		ck := (&http.Response{Header: h}).Cookies()
		if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Secure != tc.secure || strings.Contains(ck[0].Value, fullKey) {
			t.Fatalf("cookie %+v", ck)
		}
		req, _ := http.NewRequest("GET", f.srv.URL+"/ui/approvals", nil)
		req.AddCookie(ck[0])
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), "Book BA2043") {
			t.Errorf("with the session: %d", res.StatusCode)
		}
		// A tampered cookie (read-only turned full) is no session.
		bad := *ck[0]
		bad.Value = strings.Replace(bad.Value, ".w.", ".r.", 1)
		req, _ = http.NewRequest("GET", f.srv.URL+"/ui/approvals", nil)
		req.AddCookie(&bad)
		res, _ = noRedirect.Do(req)
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Errorf("tampered cookie: %d", res.StatusCode)
		}
		// The session's CSRF token works only with the session.
		m := csrfRe.FindStringSubmatch(string(body))
		form := url.Values{"csrf": {m[1]}}
		req, _ = http.NewRequest("POST", f.srv.URL+"/ui/schedules/morning-brief/run", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(ck[0])
		res, _ = noRedirect.Do(req)
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || len(f.sched.runs) != 1 {
			t.Errorf("run now with the session: %d %v", res.StatusCode, f.sched.runs)
		}
		if code, _, _ := f.post(fullKey, "/ui/schedules/morning-brief/run", form, nil); code != http.StatusForbidden {
			t.Errorf("the session's token with a bearer key: %d", code)
		}
	}
}

func TestChangesNeedCSRFAndAFullKey(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	tok, rtok := f.csrf(fullKey), f.csrf(readKey)
	actions := []struct {
		path string
		form url.Values
		did  func() bool
	}{
		{"/ui/deliveries/" + f.dead[0] + "/retry", nil, func() bool {
			d, _ := f.db.Delivery(context.Background(), f.dead[0])
			return d.State == store.StateQueued
		}},
		{"/ui/approvals/appr_1/decide", url.Values{"decision": {"granted"}, "reason": {"ok by me"}}, func() bool { return len(f.appr.decided) == 1 }},
		{"/ui/approvals/appr_dead/retry-injection", nil, func() bool { return len(f.appr.retried) == 1 }},
		{"/ui/schedules/morning-brief/run", nil, func() bool { return len(f.sched.runs) == 1 }},
		{"/ui/schedules/morning-brief/pause", nil, func() bool { return f.sched.paused["morning-brief"] != "" }},
		{"/ui/schedules/morning-brief/resume", nil, func() bool { return f.sched.resumed == 1 }},
		{"/ui/webhooks/partner-crm/enable", nil, func() bool { return !f.hooks.disabled["partner-crm"] }},
		{"/ui/webhooks/dev-sink/test", nil, func() bool { return f.enq.n == 1 }},
		{"/ui/dev/reply", url.Values{"channel": {"sms"}, "from": {"+15555550100"}, "body": {"YES 123456"}}, func() bool { return len(f.dev.replies) == 1 }},
		{"/ui/dev/slack/message", url.Values{"user": {"U012AB3CD"}, "channel": {"C0TRAVEL"}, "thread_ts": {"1795484400.000003"}, "text": {"and back on Sunday?"}},
			func() bool {
				return slices.Contains(f.dev.replies, "slack:U012AB3CD:C0TRAVEL:1795484400.000003:and back on Sunday?")
			}},
		{"/ui/dev/slack/click", url.Values{"user": {"U012AB3CD"}, "channel": {"D012AB3CD"}, "approve": {"appr_1:n0nce"}, "deny": {"appr_1:n0nce2"}, "pick": {"deny"}},
			func() bool {
				return slices.Contains(f.dev.replies, "click:U012AB3CD:D012AB3CD:beachd_deny:appr_1:n0nce2")
			}},
		{"/ui/retry", url.Values{"since": {"2020-01-01T00:00"}}, func() bool {
			d, _ := f.db.Delivery(context.Background(), f.dead[1])
			return d.State == store.StateQueued
		}},
	}
	for _, a := range actions {
		with := func(tok string) url.Values {
			v := url.Values{"csrf": {tok}}
			for k, x := range a.form {
				v[k] = x
			}
			return v
		}
		if code, _, _ := f.post(fullKey, a.path, with(""), nil); code != http.StatusForbidden || a.did() {
			t.Errorf("%s without the CSRF token: %d, acted %v", a.path, code, a.did())
		}
		if code, _, _ := f.post(fullKey, a.path, with(tok), map[string]string{"Origin": "https://evil.example"}); code != http.StatusForbidden || a.did() {
			t.Errorf("%s from another origin: %d", a.path, code)
		}
		if code, _, _ := f.post(readKey, a.path, with(rtok), nil); code != http.StatusForbidden || a.did() {
			t.Errorf("%s with a read-only key: %d", a.path, code)
		}
		if code, body, _ := f.post(fullKey, a.path, with(tok), nil); code != http.StatusSeeOther || !a.did() {
			t.Errorf("%s: %d, acted %v\n%.500s", a.path, code, a.did(), body)
		}
	}
	if f.woke != 2 {
		t.Errorf("the dispatcher was woken %d times, want 2 (retry, bulk retry)", f.woke)
	}
	if f.appr.decided[0] != "appr_1:granted:ok by me" {
		t.Errorf("decision %v", f.appr.decided)
	}
}

func TestReadOnlyKeySeesNoButton(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	for path := range f.screens() {
		_, body, _ := f.get(readKey, path)
		main := body
		if i := strings.Index(body, `<main`); i >= 0 {
			main = body[i:]
		}
		if strings.Contains(main, `method="post"`) {
			t.Errorf("read-only %s shows a form that changes something", path)
		}
	}
	_, body, _ := f.get(fullKey, "/ui/approvals/appr_1")
	if !strings.Contains(body, `value="granted"`) {
		t.Errorf("a full key sees no decision buttons")
	}
}

func TestBulkRetryCountsBeforeItChanges(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	_, body, _ := f.get(fullKey, "/ui/retry?since=2020-01-01T00:00&channel=webhook")
	if !strings.Contains(body, "<strong>2</strong> dead deliveries") || !strings.Contains(body, "Retry 2 deliveries") {
		t.Fatalf("dry run:\n%s", body)
	}
	for _, id := range f.dead {
		if d, _ := f.db.Delivery(context.Background(), id); d.State != store.StateDead {
			t.Fatalf("the count changed %s to %s", id, d.State)
		}
	}
	_, body, _ = f.get(fullKey, "/ui/retry?since=2020-01-01T00:00&channel=email")
	if !strings.Contains(body, "<strong>0</strong> dead deliveries") || strings.Contains(body, "Retry 0") {
		t.Errorf("no dead email: %s", body)
	}
}

func TestLiveFigures(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	code, body, _ := f.get(fullKey, "/ui/pulse")
	var p Pulse
	if code != 200 || json.Unmarshal([]byte(body), &p) != nil || p.Dead != 2 || p.Retrying != 2 || p.Pending != 2 || p.Version == "" {
		t.Fatalf("pulse: %d %s", code, body)
	}
	// The event stream sends the figures at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/ui/events", nil)
	req.Header.Set("Authorization", "Bearer "+readKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 1024)
	for !strings.Contains(string(buf), `"dead":2`) {
		n, err := res.Body.Read(chunk)
		if err != nil {
			t.Fatalf("events: %v after %q", err, buf)
		}
		buf = append(buf, chunk[:n]...)
	}
	if !strings.Contains(string(buf), "event: pulse\ndata: {") {
		t.Errorf("events: %q", buf)
	}
	// Without a key: 401 for the stream, not a redirect.
	req, _ = http.NewRequest("GET", f.srv.URL+"/ui/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	res2, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if res2.StatusCode != http.StatusUnauthorized {
		t.Errorf("events without a key: %d", res2.StatusCode)
	}
}

// The schedules screen offers Pause beside Run now; a paused schedule shows
// a badge, since when and by whom, and Resume instead.
func TestSchedulePauseResumeScreen(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	tok := f.csrf(fullKey)
	_, body, _ := f.get(fullKey, "/ui/schedules")
	if strings.Contains(body, "enabled: false") {
		t.Error("the schedules screen still tells operators to set enabled: false to pause")
	}
	if !strings.Contains(body, `action="/ui/schedules/morning-brief/pause"`) || strings.Contains(body, ">paused</span>") {
		t.Fatalf("no Pause button, or a paused badge before pausing:\n%s", body)
	}
	if code, _, _ := f.post(fullKey, "/ui/schedules/nope/pause", url.Values{"csrf": {tok}}, nil); code != http.StatusNotFound {
		t.Errorf("pause of an unknown schedule: %d, want 404", code)
	}
	code, _, hdr := f.post(fullKey, "/ui/schedules/morning-brief/pause", url.Values{"csrf": {tok}}, nil)
	if code != http.StatusSeeOther || !strings.Contains(hdr.Get("Location"), "done=paused") {
		t.Fatalf("pause: %d %v", code, hdr)
	}
	if by := f.sched.paused["morning-brief"]; !strings.HasPrefix(by, "console key ") {
		t.Errorf("paused by %q", by)
	}
	_, body, _ = f.get(fullKey, "/ui/schedules?done=paused")
	for _, want := range []string{">paused</span>", `action="/ui/schedules/morning-brief/resume"`, "none while paused",
		"by console key ", "The schedule is paused"} {
		if !strings.Contains(body, want) {
			t.Errorf("paused screen lacks %q", want)
		}
	}
	if strings.Contains(body, `action="/ui/schedules/morning-brief/pause"`) {
		t.Error("a paused schedule still offers Pause")
	}
	if code, _, _ := f.post(fullKey, "/ui/schedules/morning-brief/resume", url.Values{"csrf": {tok}}, nil); code != http.StatusSeeOther || f.sched.resumed != 1 {
		t.Fatalf("resume: %d, resumed %d", code, f.sched.resumed)
	}
	if _, body, _ = f.get(fullKey, "/ui/schedules"); strings.Contains(body, ">paused</span>") {
		t.Error("still paused after Resume")
	}
}

// The approval page shows the event trail as a timeline, every value from
// outside escaped, and says loudly when the chain does not verify.
func TestApprovalTrailTimeline(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	code, body, _ := f.get(readKey, "/ui/approvals/appr_dead")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{"Event trail", "6 events", "the chain is intact", "task gone",
		`<span class="badge bad">ignored</span> <span class="small">(wrong-person)</span>`, "mallory@example.org",
		`<span class="muted">senderAuth</span> dmarc=pass`, `<span class="muted">twilioSignature</span> valid`,
		"&lt;script&gt;alert(1)&lt;/script&gt; Mozilla/5.0 (iPhone)", "#6"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>alert(1)") {
		t.Fatal("the user agent is not escaped")
	}
	_, body, _ = f.get(readKey, "/ui/approvals/appr_tampered")
	if !regexp.MustCompile(`<p class="alert" role="alert"><strong>The trail does not verify</strong> at event 2: changed`).MatchString(body) ||
		!strings.Contains(body, "operator:ffffffff") || strings.Contains(body, "the chain is intact") {
		t.Fatalf("tampered trail page:\n%s", body)
	}
}
