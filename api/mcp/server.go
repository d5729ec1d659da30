package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where the server is mounted.
const Path = "/mcp"

// Session is the session of the approvals ask_for_approval creates: they
// belong to no suspended turn, and their decisions are read with
// get_approval instead of being injected into the agent.
const Session = store.MCPSession

// Source is the source of the envelopes the tools store.
const Source = "mcp"

// Approvals is what the tools need of the approvals service
// (approvals.Service implements it).
type Approvals interface {
	Get(ctx context.Context, id string) (*approvals.View, error)
}

var _ Approvals = (*approvals.Service)(nil)

// Config is what the tools call.
type Config struct {
	// Ingester stores messages, as POST /v1/deliveries does.
	Ingester *api.Ingester
	// Deliveries is read by get_delivery.
	Deliveries store.Deliveries
	// Approvals is read by get_approval; nil leaves the approval tools
	// out.
	Approvals Approvals
	// Conversations serves the conversation tools; nil leaves them out
	// (no agent has inbound addresses).
	Conversations api.Conversations
	// Agents are the configured agent names.
	Agents map[string]bool
	// MaxBodyBytes bounds a request body, as the API's (api.Config).
	MaxBodyBytes int64
	// NewID mints ids (store.Store.NewID).
	NewID func(prefix string) string
	Now   func() time.Time
	// Version is beachd's, told to clients.
	Version string
	Log     *slog.Logger
}

// service holds the tools' dependencies.
type service struct {
	cfg Config
	log *slog.Logger
}

// New builds the MCP server's HTTP handler: Streamable HTTP, stateless,
// answering each POST with one JSON body.
func New(cfg Config) (http.Handler, error) {
	if cfg.Ingester == nil || cfg.Deliveries == nil || cfg.NewID == nil {
		return nil, errors.New("mcp: Ingester, Deliveries and NewID are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 8<<20 + 64<<10
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &service{cfg: cfg, log: cfg.Log}
	srv := sdk.NewServer(&sdk.Implementation{Name: "beachd", Title: "beachd", Version: cfg.Version},
		&sdk.ServerOptions{Instructions: instructions})
	for _, t := range s.tools() {
		srv.AddTool(t.def, s.handler(t.def.Name, t.call))
	}
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		// Any replica answers any call; nothing is lost in a restart.
		Stateless:    true,
		JSONResponse: true,
		Logger:       cfg.Log,
		// The bearer key guards the route; behind a reverse proxy on
		// loopback, the Host is the public name.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        cfg.MaxBodyBytes,
	}), nil
}

// Routes mounts the server at Path, behind the API keys.
func Routes(h http.Handler) []api.Route {
	return []api.Route{{Method: "", Pattern: Path, Handler: h, Auth: true}}
}

// tool is one tool's definition and implementation.
type tool struct {
	def  *sdk.Tool
	call func(ctx context.Context, raw json.RawMessage) (any, error)
}

// handler wraps a tool: its result is the structured content (and the
// same JSON as text, for clients that read only text); any error is a
// tool result with isError naming every problem.
func (s *service) handler(name string, call func(context.Context, json.RawMessage) (any, error)) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, _ error) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("mcp tool panicked", "tool", name, "panic", fmt.Sprint(p))
				res = s.toolError(name, fmt.Errorf("panic"))
			}
		}()
		out, err := call(ctx, req.Params.Arguments)
		if err != nil {
			return s.toolError(name, err), nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return s.toolError(name, fmt.Errorf("encode result: %w", err)), nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
	}
}

// toolError is err as a tool result: the API's error text and every
// problem on a line of its own, "path: reason".
func (s *service) toolError(name string, err error) *sdk.CallToolResult {
	status, msg, probs := api.DescribeError(err)
	if status == http.StatusInternalServerError {
		s.log.Error("mcp tool failed", "tool", name, "err", err)
	}
	var b strings.Builder
	b.WriteString(msg)
	if len(probs) > 0 {
		b.WriteString(":")
		for _, p := range probs {
			b.WriteString("\n- ")
			if p.Path != "" {
				b.WriteString(p.Path + ": ")
			}
			b.WriteString(p.Reason)
		}
	}
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: b.String()}}}
	res.SetError(err)
	return res
}

// renamed rewrites the paths of err's problems by the first matching
// prefix of names (the envelope a tool built, named by the arguments it
// came from).
func renamed(err error, names [][2]string) error {
	rename := func(ps []envelope.Problem) []envelope.Problem {
		out := make([]envelope.Problem, len(ps))
		for i, p := range ps {
			out[i] = p
			for _, n := range names {
				if p.Path == n[0] || strings.HasPrefix(p.Path, n[0]+".") || strings.HasPrefix(p.Path, n[0]+"[") {
					out[i].Path = strings.TrimPrefix(n[1]+p.Path[len(n[0]):], ".")
					break
				}
			}
		}
		return out
	}
	var ve *envelope.ValidationError
	var ue *api.UnprocessableError
	var ce *api.ConflictError
	switch {
	case errors.As(err, &ve):
		return &envelope.ValidationError{Problems: rename(ve.Problems)}
	case errors.As(err, &ue):
		return &api.UnprocessableError{Problems: rename(ue.Problems)}
	case errors.As(err, &ce):
		return &api.ConflictError{Problems: rename(ce.Problems), Err: ce.Err}
	}
	return err
}

// notFound is an unknown id, named as a bad argument.
func notFound(arg, what string) error {
	return &envelope.ValidationError{Problems: []envelope.Problem{{Path: arg, Reason: what}}}
}
