package main

import (
	"context"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/api/mcp"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
)

type recordingSender struct{ calls []string }

func (r *recordingSender) Inject(_ context.Context, agentName, session, turn string, _ envelope.ApprovalResponse) error {
	r.calls = append(r.calls, session+"/"+turn)
	return nil
}

func (r *recordingSender) HasDecision(context.Context, string, string, string, envelope.ApprovalResponse) (bool, error) {
	return true, nil
}

// skipMCP takes MCP approvals' decisions as delivered without a call,
// passes every other to the agent's sender (keeping its Confirmer), and
// without a sender refuses the others as the injector did.
func TestSkipMCP(t *testing.T) {
	ctx := context.Background()
	rec := &recordingSender{}
	s := skipMCP(rec)
	if err := s.Inject(ctx, "travel", mcp.Session, "apr_1", envelope.ApprovalResponse{}); err != nil || len(rec.calls) != 0 {
		t.Fatalf("MCP approval: %v, calls %v", err, rec.calls)
	}
	if err := s.Inject(ctx, "travel", "ctx_1", "task_1", envelope.ApprovalResponse{}); err != nil || len(rec.calls) != 1 || rec.calls[0] != "ctx_1/task_1" {
		t.Fatalf("turn approval: %v, calls %v", err, rec.calls)
	}
	if _, ok := s.(approvals.Confirmer); !ok {
		t.Fatalf("the agent's Confirmer is hidden")
	}
	none := skipMCP(nil)
	if err := none.Inject(ctx, "travel", mcp.Session, "apr_1", envelope.ApprovalResponse{}); err != nil {
		t.Fatalf("MCP approval of an agent without injector: %v", err)
	}
	if err := none.Inject(ctx, "travel", "ctx_1", "task_1", envelope.ApprovalResponse{}); err == nil || !strings.Contains(err.Error(), "no injector configured") {
		t.Fatalf("turn approval without injector: %v", err)
	}
	if _, ok := none.(approvals.Confirmer); ok {
		t.Fatalf("no sender, yet a Confirmer")
	}
}
