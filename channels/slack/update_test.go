package slack

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/slack/slacktest"
	"github.com/cool-ai/beachd/store"
)

type approvalsByID map[string]*store.Approval

func (m approvalsByID) Approval(_ context.Context, id string) (*store.Approval, error) {
	if a, ok := m[id]; ok {
		return a, nil
	}
	return nil, store.ErrNotFound
}

// A message whose approval was decided before it was posted (the update
// that followed the decision had nothing to rewrite) is rewritten as soon
// as it is posted; one still pending keeps its buttons.
func TestMessageDecidedBeforeItWasShown(t *testing.T) {
	fake := slacktest.StartFake(t)
	req, _ := json.Marshal(map[string]string{"summary": "Book BA2043 for 6 people"})
	aps := approvalsByID{"apr_1": {ID: "apr_1", State: store.ApprovalPending, Request: req}}
	s, err := NewSender(Config{Approvals: aps}, newClient(t, fake.URL, nil), openStore(t), newRenderer(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(context.Background(), approvalJob("dlv_1", "U012AB3CD")); err != nil {
		t.Fatal(err)
	}
	if _, ups, _ := fake.Snapshot(); len(ups) != 0 {
		t.Fatalf("a pending approval's message rewritten: %+v", ups)
	}
	aps["apr_1"] = &store.Approval{ID: "apr_1", State: store.ApprovalDenied, Request: req, DecidedBy: "alice@example.org",
		Channel: "email", DecidedAt: time.Date(2026, 4, 20, 9, 0, 0, 0, time.UTC), Reason: strings.Repeat("r", 900)}
	res, err := s.Deliver(context.Background(), approvalJob("dlv_2", "U012AB3CD"))
	if err != nil {
		t.Fatal(err)
	}
	posts, ups, _ := fake.Snapshot()
	if len(ups) != 1 || ups[0].TS != posts[1].TS || !strings.Contains(ups[0].Text, "*Denied* by alice@example.org (email)") ||
		strings.Contains(ups[0].Blocks, "beachd_approve") || len(ups[0].Text) > 3000 || res.Receipt.Data.(map[string]any)["rewritten"] == nil {
		t.Fatalf("updates %+v, receipt %+v", ups, res.Receipt)
	}
}
