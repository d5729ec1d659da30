package api

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/store"
)

// AgentStatuses is what the agents endpoints read; *agent.Client
// implements it.
type AgentStatuses interface {
	Statuses() []agent.Status
	Status(name string) (agent.Status, bool)
}

var _ AgentStatuses = (*agent.Client)(nil)

// AgentRoutes serves GET /v1/agents and GET /v1/agents/{name}: per agent,
// its URL, the configured a2a_version, the A2A generation and binding in
// use, when its card was last read and the last card error.
func AgentRoutes(src AgentStatuses, log *slog.Logger) []Route {
	h := agentHandlers{src: src, log: log}
	return []Route{
		{Method: "GET", Pattern: "/v1/agents", Handler: http.HandlerFunc(h.list), Auth: true},
		{Method: "GET", Pattern: "/v1/agents/{name}", Handler: http.HandlerFunc(h.get), Auth: true},
	}
}

type agentHandlers struct {
	src AgentStatuses
	log *slog.Logger
}

// AgentView is the JSON view of one agent.
type AgentView struct {
	Name       string     `json:"name"`
	URL        string     `json:"url"`
	A2AVersion string     `json:"a2aVersion"`           // as configured: auto, 1.0 or 0.3
	Generation string     `json:"generation,omitempty"` // in use; absent before first contact
	Binding    string     `json:"binding,omitempty"`    // JSONRPC or HTTP+JSON
	Endpoint   string     `json:"endpoint,omitempty"`   // where requests go
	ChosenBy   string     `json:"chosenBy,omitempty"`   // config, card or probe
	CardReadAt *time.Time `json:"cardReadAt,omitempty"`
	CardError  string     `json:"cardError,omitempty"`
}

func agentView(s agent.Status) AgentView {
	v := AgentView{Name: s.Name, URL: s.URL, A2AVersion: s.Configured, Generation: s.Generation,
		Binding: s.Binding, Endpoint: s.Endpoint, ChosenBy: s.ChosenBy, CardError: s.CardError}
	if !s.CardReadAt.IsZero() {
		t := s.CardReadAt.UTC()
		v.CardReadAt = &t
	}
	return v
}

func (h agentHandlers) list(w http.ResponseWriter, r *http.Request) {
	out := []AgentView{}
	for _, s := range h.src.Statuses() {
		out = append(out, agentView(s))
	}
	WriteJSON(w, http.StatusOK, map[string]any{"agents": out})
}

func (h agentHandlers) get(w http.ResponseWriter, r *http.Request) {
	s, ok := h.src.Status(r.PathValue("name"))
	if !ok {
		WriteError(w, h.log, store.ErrNotFound)
		return
	}
	WriteJSON(w, http.StatusOK, agentView(s))
}
