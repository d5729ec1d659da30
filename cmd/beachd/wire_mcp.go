package main

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/cool-ai/beachd/api/mcp"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
)

// wireMCP mounts the MCP server at /mcp (unless mcp.enabled is false): its
// tools call the Ingester, the store, the approvals service and the
// conversations router, as the API's handlers do.
func (a *app) wireMCP(maxBody int64) error {
	if !a.cfg.MCP.On() {
		return nil
	}
	agents := map[string]bool{}
	for name := range a.cfg.Agents {
		agents[name] = true
	}
	info, _ := debug.ReadBuildInfo()
	cfg := mcp.Config{Ingester: a.enqueuer, Deliveries: a.db, Conversations: a.conversationsAPI(), Agents: agents,
		MaxBodyBytes: maxBody, NewID: a.db.NewID, Now: a.now, Version: versionString(version, info),
		Log: a.log.With("component", "mcp")}
	if svc, ok := a.preparer.(*approvals.Service); ok {
		cfg.Approvals = svc
	}
	h, err := mcp.New(cfg)
	if err != nil {
		return err
	}
	a.routes = append(a.routes, mcp.Routes(h)...)
	return nil
}

// skipMCP wraps an agent's injection Sender: the decisions of approvals
// asked through the MCP tools (session mcp.Session) belong to no
// suspended turn, and are taken as delivered without calling the agent —
// the MCP caller reads them with get_approval. Every other injection goes
// to next (nil: the agent has no injector).
func skipMCP(next approvals.Sender) approvals.Sender {
	if c, ok := next.(approvals.Confirmer); ok {
		return mcpConfirmer{mcpSender{next}, c}
	}
	return mcpSender{next}
}

type mcpSender struct{ next approvals.Sender }

func (s mcpSender) Inject(ctx context.Context, agentName, session, turn string, resp envelope.ApprovalResponse) error {
	if session == mcp.Session {
		return nil
	}
	if s.next == nil {
		return fmt.Errorf("no injector configured for agent %q", agentName)
	}
	return s.next.Inject(ctx, agentName, session, turn, resp)
}

type mcpConfirmer struct {
	mcpSender
	approvals.Confirmer
}
