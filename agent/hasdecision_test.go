package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// TestHasDecision: after a decision is injected and the agent completes
// the task, the task's history shows it — for that approval, in that
// session, and for no other.
func TestHasDecision(t *testing.T) {
	for _, mk := range []func(*testing.T) peer{func(t *testing.T) peer { return jsPeer(t, "jsonrpc") }, goPeer} {
		p := mk(t)
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := clientFor(t, p.url, "")
			turn, err := c.StartTurn(ctx, "travel", "approve:appr-has", "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.WaitTurn(ctx, "travel", turn, 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			resp := envelope.ApprovalResponse{ApprovalID: "appr-has", Decision: "granted", DecidedAt: time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)}
			if had, err := c.HasDecision(ctx, "travel", turn.ContextID, turn.TaskID, resp); err != nil || had {
				t.Fatalf("before the injection: %v, %v", had, err)
			}
			if err := c.Inject(ctx, "travel", turn.ContextID, turn.TaskID, resp); err != nil {
				t.Fatal(err)
			}
			if _, err := p.approvals(ctx, 1); err != nil {
				t.Fatal(err)
			}
			for _, c2 := range []struct {
				session, approval string
				want              bool
			}{
				{turn.ContextID, "appr-has", true},
				{"", "appr-has", true},
				{turn.ContextID, "appr-other", false},
				{"another-session", "appr-has", false},
			} {
				r := resp
				r.ApprovalID = c2.approval
				had, err := c.HasDecision(ctx, "travel", c2.session, turn.TaskID, r)
				if err != nil || had != c2.want {
					t.Errorf("session %q approval %q: %v, %v; want %v", c2.session, c2.approval, had, err, c2.want)
				}
			}
			if _, err := c.HasDecision(ctx, "travel", "", "no-such-task", resp); err == nil {
				t.Error("an unknown task: want an error")
			}
		})
	}
}
