package main

import (
	"runtime/debug"

	"github.com/cool-ai/beachd/api/mcp"
	"github.com/cool-ai/beachd/approvals"
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
