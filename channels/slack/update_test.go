package slack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/slack/slacktest"
	"github.com/cool-ai/beachd/store"
)

// A message asking approvals is posted with FollowDecision (its record
// writes the follow-up that rewrites it if an approval was decided before
// its ts was recorded); an update, and a message asking nothing, without.
// The decided text keeps within a section and has no buttons.
func TestMessageAskingApprovalsFollowsTheDecision(t *testing.T) {
	fake := slacktest.StartFake(t)
	s, err := NewSender(Config{}, newClient(t, fake.URL, nil), openStore(t), newRenderer(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Deliver(context.Background(), approvalJob("dlv_1", "U012AB3CD"))
	if err != nil || !res.FollowDecision {
		t.Fatalf("a message asking an approval: %+v, %v", res, err)
	}
	plain := approvalJob("dlv_2", "U012AB3CD")
	plain.Delivery.ApprovalIDs = nil
	if res, err := s.Deliver(context.Background(), plain); err != nil || res.FollowDecision {
		t.Fatalf("a message asking nothing: %+v, %v", res, err)
	}
	m, err := DecidedMessage("Book BA2043 for 6 people", store.ApprovalDenied, "alice@example.org",
		strings.Repeat("r", 900), time.Date(2026, 4, 20, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	posts, _, _ := fake.Snapshot()
	up := approvalJob("dlv_3", "U012AB3CD")
	up.Delivery.Extra = map[string]string{ExtraUpdate: posts[0].Channel + "/" + posts[0].TS}
	if res, err := s.Deliver(context.Background(), up); err != nil || res.FollowDecision {
		t.Fatalf("an update: %+v, %v", res, err)
	}
	if !strings.Contains(m.Text, "*Denied* by alice@example.org (slack)") || len(m.Text) > 3000 || strings.Contains(fmt.Sprint(m.Blocks), "beachd_approve") {
		t.Fatalf("decided message %+v", m)
	}
}
