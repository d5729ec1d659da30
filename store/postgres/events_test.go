package postgres

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
)

// ingestTrail stores approval a1 on db, asked of two recipients, and
// decides it by an SMS vote: four events.
func ingestTrail(t *testing.T, db *DB, now time.Time) {
	t.Helper()
	_, err := db.Ingest(apprCtx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "email", To: "a@example.org", ApprovalIDs: []string{"a1"}}},
		Approvals: []store.NewApproval{{Approval: store.Approval{ID: "a1", Request: []byte(`{}`), ExpiresAt: now.Add(time.Hour)},
			Events: []store.ApprovalEvent{{Kind: store.EventAsked, Actor: "a@example.org", Channel: "email"},
				{Kind: store.EventAsked, Actor: "+15550001111", Channel: "sms"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = db.Decide(apprCtx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, DecidedBy: "+15550001111", Channel: "sms",
		MessageID: "SM1", At: now, InjectionID: "inj-a1",
		Vote: &store.ApprovalEvent{Kind: store.EventVoted, Actor: "+15550001111", Channel: "sms", Evidence: map[string]string{"twilioSignature": "valid"}}})
	if err != nil {
		t.Fatal(err)
	}
}

// Editing one stored event in the database (an UPDATE of its row, its
// hash left alone) is reported by verification at that event's position;
// a deleted row where it is missing.
func TestTamperedTrailIsReported(t *testing.T) {
	for _, c := range []struct {
		name   string
		sql    string
		pos    int
		reason string
	}{
		{"evidence of event 3 changed",
			`UPDATE approval_events SET doc = jsonb_set(doc::jsonb, '{evidence,twilioSignature}', '"absent"')::json WHERE approval_id = 'a1' AND seq = 3`,
			3, "changed"},
		{"actor of event 2 changed",
			`UPDATE approval_events SET doc = replace(doc::text, '+15550001111', '+15550009999')::json WHERE approval_id = 'a1' AND seq = 2`,
			2, "changed"},
		{"event 2 deleted", `DELETE FROM approval_events WHERE approval_id = 'a1' AND seq = 2`, 2, "event 2 was removed"},
		{"last event deleted", `DELETE FROM approval_events WHERE approval_id = 'a1' AND seq = 4`, 4, "removed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := fakeclock.New(apprStart)
			db := openAppr(t, clock)
			ingestTrail(t, db, clock.Now())
			evs, head, err := db.ApprovalEvents(apprCtx, "a1")
			if err != nil || len(evs) != 4 {
				t.Fatalf("trail: %d events, %v", len(evs), err)
			}
			if err := store.VerifyApprovalTrail(evs, head); err != nil {
				t.Fatalf("untouched trail: %v", err)
			}
			tag, err := db.pool.Exec(apprCtx, c.sql)
			if err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("tamper: %v rows, %v", tag.RowsAffected(), err)
			}
			evs, head, err = db.ApprovalEvents(apprCtx, "a1")
			if err != nil {
				t.Fatal(err)
			}
			err = store.VerifyApprovalTrail(evs, head)
			var ce *store.ChainError
			if !errors.As(err, &ce) || ce.Position != c.pos || !strings.Contains(ce.Reason, c.reason) {
				t.Fatalf("verify: %v; want %q at position %d", err, c.reason, c.pos)
			}
		})
	}
}

// Three replicas appending to one approval's trail at once, and deciding
// it, form one chain: every event once, numbered without a gap.
func TestReplicasAppendOneChain(t *testing.T) {
	clock := fakeclock.New(apprStart)
	reps := openApprReplicas(t, clock, 3)
	if _, err := reps[0].Ingest(apprCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "email", To: "a@example.org", ApprovalIDs: []string{"a1"}}},
		Approvals: []store.NewApproval{{Approval: store.Approval{ID: "a1", Request: []byte(`{}`), ExpiresAt: clock.Now().Add(time.Hour)}}}}); err != nil {
		t.Fatal(err)
	}
	const each = 10
	var wg sync.WaitGroup
	errs := make(chan error, 3*each+3)
	for i, db := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if _, err := db.AppendApprovalEvent(apprCtx, "a1", store.ApprovalEvent{Kind: store.EventReminded, Actor: fmt.Sprintf("r%d-%d", i, j)}); err != nil {
					errs <- err
				}
			}
			_, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, Channel: "sms", MessageID: fmt.Sprint("SM", i),
				At: clock.Now(), InjectionID: fmt.Sprint("inj-", i), Vote: &store.ApprovalEvent{Kind: store.EventVoted, Actor: fmt.Sprint("+1555000", i)}})
			if err != nil && !errors.Is(err, store.ErrAlreadyDecided) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs, head, err := reps[1].ApprovalEvents(apprCtx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.VerifyApprovalTrail(evs, head); err != nil {
		t.Fatal(err)
	}
	// 30 reminders, 3 votes (one decided, two ignored), one decision.
	if len(evs) != 3*each+3+1 {
		t.Fatalf("%d events, want %d", len(evs), 3*each+4)
	}
}
