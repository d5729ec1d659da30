package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/schedule"
	"github.com/cool-ai/beachd/store"
)

var updateGolden = flag.Bool("update", false, "rewrite api/testdata/views/*.json from the current output")

// The fixtures set every field of every record the API shows, so that the
// golden files hold each field name and value once; the zero fixtures show
// what is left out when empty.
var (
	fixZone  = time.FixedZone("CET", 3600)
	fixTime  = time.Date(2026, 11, 21, 20, 0, 1, 123456789, time.UTC)
	fixLater = time.Date(2026, 11, 22, 8, 30, 0, 0, fixZone)
)

func fixAt(minutes int) time.Time { return fixTime.Add(time.Duration(minutes) * time.Minute) }

func fullDelivery() *store.Delivery {
	return &store.Delivery{ID: "dlv_1", EnvelopeID: "env_1", Channel: "email", To: "alice@example.org", Agent: "travel",
		State: store.StateRetrying, Attempts: 2, CreatedAt: fixTime, UpdatedAt: fixAt(1), NextAttemptAt: fixAt(2),
		LeaseUntil: fixAt(3), SentAt: fixLater, LastError: "421 try later", DeadReason: "too many attempts",
		ProviderID: "SM123", MaybeSent: true, ProviderStatus: "delivered", ApprovalIDs: []string{"apr_1", "apr_2"},
		Extra: map[string]string{"inReplyTo": "<m1@example.org>", "references": "<m0@example.org>"}}
}

func fullAttempt() store.Attempt {
	return store.Attempt{N: 1, At: fixAt(4), Duration: 1500 * time.Millisecond, Outcome: "retry", Error: "timeout",
		Receipt: json.RawMessage(`{"data":{"id":"x"},"meta":{"source":"smtp"}}`)}
}

func fullEnvelope() *store.EnvelopeRecord {
	return &store.EnvelopeRecord{ID: "env_1", Agent: "travel", Envelope: json.RawMessage(`{"role":"agent","parts":[]}`),
		CreatedAt: fixTime, DeliveryIDs: []string{"dlv_1"}, Source: "api"}
}

func fullStats() *store.DeliveryStats {
	return &store.DeliveryStats{At: fixTime, ByState: map[store.State]int{store.StateSent: 3, store.StateDead: 1},
		Channels: []*store.ChannelStats{{Channel: "email", ByState: map[store.State]int{store.StateSent: 3}, Sent1h: 1,
			Sent24h: 2, Dead1h: 3, Dead24h: 4, Retrying: 5, LastError: "boom", LastErrorAt: fixAt(5), LastSentAt: fixAt(6)}},
		Created1h: 6, Created24: 7, Sent1h: 8, Sent24h: 9, Dead1h: 10, Dead24h: 11, Dead: 12, Truncated: true}
}

func fullInjection() *store.Injection {
	resp := envelope.ApprovalResponse{ApprovalID: "apr_1", Decision: "granted", Reason: "ok", DecidedBy: "alice", DecidedAt: fixAt(7)}
	return &store.Injection{ID: "inj_1", ApprovalID: "apr_1", Agent: "travel", Session: "s1", Turn: "t1", Response: resp,
		State: "dead", Attempts: 3, Claims: 4, LeasedUntil: fixAt(8), CreatedAt: fixTime, UpdatedAt: fixAt(9),
		NextAt: fixAt(10), DoneAt: fixAt(11), LastError: "agent unreachable"}
}

func fullApproval() *approvals.View {
	return &approvals.View{
		Approval: store.Approval{ID: "apr_1", EnvelopeID: "env_1", Agent: "travel", Request: json.RawMessage(`{"toolName":"book"}`),
			Session: "s1", Turn: "t1", State: "granted", CreatedAt: fixTime, ExpiresAt: fixAt(60), DecidedAt: fixAt(12),
			DecidedBy: "operator:abcd1234", Channel: "email", MessageID: "<m2@example.org>", Reason: "fine", InjectionID: "inj_1",
			Recipients: []store.ApprovalRecipient{{Channel: "email", Address: "alice@example.org", Person: "alice", Step: 1}},
			Policy:     "two-of-three", Quorum: 2, Votes: []store.Vote{{Person: "alice", Channel: "email", Decision: "granted", At: fixAt(11)}}},
		Summary: "book (travel)",
		Audit: []store.AuditEntry{{At: fixAt(13), ApprovalID: "apr_1", Event: "decided", Channel: "email", Actor: "alice",
			MessageID: "<m2@example.org>", Decision: "granted", Detail: "by reply"}},
		Injection: fullInjection(),
	}
}

func fullRun() store.ScheduleRun {
	return store.ScheduleRun{Schedule: "digest", Slot: fixTime, Trigger: store.TriggerManual, State: "failed",
		Reason: "agent timeout", Attempts: 2, ClaimedAt: fixAt(14), StartedAt: fixAt(15), FinishedAt: fixAt(16),
		ContextID: "ctx_1", TaskID: "task_1", PushID: "beachd-push-1", EnvelopeID: "env_2", AnsweredBy: "push", ErrorNoticeID: "env_3"}
}

func fullSchedule() schedule.Status {
	last := schedule.View(fullRun())
	return schedule.Status{Name: "digest", Cron: "0 8 * * *", TimeZone: "Europe/Zurich", Agent: "travel", Enabled: true,
		CatchUp: "last", Overlap: "skip", Running: true, Paused: true, PausedAt: fixAt(17), PausedBy: "api key abcd1234",
		Next: fixAt(18), Last: &last, LastOutcome: "failed", Recent: []schedule.RunView{last}}
}

// viewCases are the bodies the API writes, built from the fixtures as the
// handlers build them.
func viewCases() map[string]any {
	full, zero := fullDelivery(), &store.Delivery{}
	atts := []store.Attempt{fullAttempt(), {}}
	env := envelopeView(fullEnvelope())
	env.Deliveries = append(env.Deliveries, deliveryViewOf(full, atts))
	return map[string]any{
		"delivery":         deliveryViewOf(full, atts),
		"delivery-zero":    deliveryViewOf(zero, nil),
		"envelope":         env,
		"deliveries":       map[string]any{"deliveries": deliveryItems([]*store.Delivery{full, zero}), "next": "dlv_0"},
		"stats":            deliveryStatsView(fullStats()),
		"stats-zero":       deliveryStatsView(&store.DeliveryStats{}),
		"approval":         approvalView(fullApproval()),
		"approval-zero":    approvalView(&approvals.View{}),
		"approvals":        map[string]any{"approvals": approvalViews([]*approvals.View{fullApproval(), {}}), "next": "apr_0"},
		"injection":        injectionView(fullInjection()),
		"injection-zero":   injectionView(&store.Injection{}),
		"schedules":        map[string]any{"schedules": scheduleViews([]schedule.Status{fullSchedule(), {}})},
		"schedule":         map[string]any{"schedule": scheduleView(fullSchedule())},
		"run":              map[string]any{"run": runView(fullRun().ID(), fullRun())},
		"run-zero":         map[string]any{"run": runView(store.ScheduleRun{}.ID(), store.ScheduleRun{})},
		"retried":          map[string]any{"deliveries": deliveryItems([]*store.Delivery{full})},
		"deliveries-empty": map[string]any{"deliveries": deliveryItems(nil)},
	}
}

// TestViewsGolden pins the JSON of every body built from stored records:
// the API's field names, omissions and values do not follow the records.
func TestViewsGolden(t *testing.T) {
	for name, body := range viewCases() {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteJSON(rec, 200, body)
			path := filepath.Join("testdata", "views", name+".json")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, rec.Body.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec.Body.Bytes(), want) {
				t.Errorf("%s differs from %s:\n%s", name, path, rec.Body.Bytes())
			}
		})
	}
}

// unshown are the fields no view is built from: approvals.View leaves out
// the recipients' nonces.
var unshown = map[string]bool{"ApprovalRecipient.Nonce": true}

// TestViewFixturesComplete fails when a record gains a field the fixtures
// leave empty: set it, and the golden files show whether the API shows it.
func TestViewFixturesComplete(t *testing.T) {
	for name, v := range map[string]any{"Delivery": fullDelivery(), "Attempt": fullAttempt(), "EnvelopeRecord": fullEnvelope(),
		"DeliveryStats": fullStats(), "ChannelStats": fullStats().Channels[0], "Injection": fullInjection(),
		"Approval": fullApproval().Approval, "ApprovalRecipient": fullApproval().Recipients[0],
		"AuditEntry": fullApproval().Audit[0], "ScheduleRun": fullRun(), "Status": fullSchedule()} {
		rv := reflect.Indirect(reflect.ValueOf(v))
		for i := range rv.NumField() {
			if rv.Field(i).IsZero() && !unshown[name+"."+rv.Type().Field(i).Name] {
				t.Errorf("%s.%s is not set in the fixture", name, rv.Type().Field(i).Name)
			}
		}
	}
}

// TestApprovalViewHidesNonces: the recipients' nonces, from which their
// tokens are derived, never show, even on a view that carries them.
func TestApprovalViewHidesNonces(t *testing.T) {
	v := fullApproval()
	v.Recipients[0].Nonce = "nonce-secret"
	b, err := json.Marshal(approvalView(v))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("nonce")) {
		t.Fatalf("the view shows a nonce: %s", b)
	}
}
