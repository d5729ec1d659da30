// Package agenttest runs a real a2a-go (v0.3.x) JSON-RPC agent server over
// httptest for beachd's tests: a Beach-like agent that suspends a turn on an
// approval-request and resumes when an approval-response is injected.
package agenttest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/push"

	"github.com/cool-ai/beachd/envelope"
)

// Received is one approval-response the agent received.
type Received struct {
	ContextID string
	TaskID    string
	MessageID string
	Response  envelope.ApprovalResponse
	Raw       map[string]any // the data part as received
	Metadata  map[string]any // the data part's metadata
	At        time.Time
}

// Server is an a2a-go agent. A new message whose text starts with
// "approve:" suspends its task (input-required) with an approval-request
// data part whose approvalId is the rest of the text; a message "reply:X"
// answers at once with a Message of text X; "echo:" answers at once with a
// Message holding a data part (partType "echo") that describes what arrived
// (see Echo); any other new message completes
// its task with a response text part and a domain-data part. "brief:"
// completes its task with a typed morning briefing (a response part "Good
// morning. Three tasks today." and a domain-data part, slotKey "today",
// listing three tasks); "fail:REASON" fails its task with REASON; "hang:"
// leaves its task working forever; "slow:X" is working for Options.Slow
// (400ms by default), then completes like any other message. A message into an existing task that
// carries an approval-response part is recorded and completes the task.
type Server struct {
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	received []Received
	contexts []string
	events   []Event
	notify   chan struct{}
	slow     time.Duration
	failGet  bool
}

// Options are StartWith's.
type Options struct {
	// Card serves a 0.3 agent card (protocolVersion 0.3.0, JSONRPC at URL)
	// at /.well-known/agent-card.json.
	Card bool
	// Push says capabilities.pushNotifications in the card and gives the
	// handler a2a-go's push notifications (a2asrv.WithPushNotifications:
	// its in-memory config store and HTTP sender, which posts the whole
	// task after each of its events to the URL a SendMessage names).
	Push bool
	// Slow is how long a "slow:" task works; 400ms when zero.
	Slow time.Duration
	// FailGetTask answers every GetTask with an internal error (JSON-RPC
	// -32603), as an agent that cannot read its tasks for a while.
	FailGetTask bool
}

// Event is one SendMessage or GetTask the agent served (Kind "call",
// Method) or one push it sent (Kind "push", State of the task pushed, Err
// when the push failed), in order.
type Event struct {
	Kind   string
	Method string
	State  string
	Err    string
}

// Start starts the server; Close it when done. It serves no agent card,
// like many 0.3 agents.
func Start() *Server { return StartOn(nil, false) }

// StartOn starts the server on l (a new loopback listener when nil); with
// card, it also serves a 0.3 agent card (protocolVersion 0.3.0, JSONRPC at
// URL) at /.well-known/agent-card.json.
func StartOn(l net.Listener, card bool) *Server { return StartWith(l, Options{Card: card}) }

// StartWith starts the server on l (a new loopback listener when nil) with
// o.
func StartWith(l net.Listener, o Options) *Server {
	s := &Server{notify: make(chan struct{}, 1), slow: o.Slow, failGet: o.FailGetTask}
	if s.slow <= 0 {
		s.slow = 400 * time.Millisecond
	}
	var lw io.Writer = io.Discard
	if os.Getenv("AGENTTEST_LOG") != "" {
		lw = os.Stderr
	}
	opts := []a2asrv.RequestHandlerOption{a2asrv.WithLogger(slog.New(slog.NewTextHandler(lw, nil))),
		a2asrv.WithCallInterceptor(calls{s})}
	if o.Push {
		opts = append(opts, a2asrv.WithPushNotifications(push.NewInMemoryStore(),
			&sender{s: s, http: push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 10 * time.Second, FailOnError: true})}))
	}
	h := a2asrv.NewHandler(&executor{s: s}, opts...)
	mux := http.NewServeMux()
	mux.Handle("/", a2asrv.NewJSONRPCHandler(h))
	s.srv = httptest.NewUnstartedServer(mux)
	if l != nil {
		s.srv.Listener.Close()
		s.srv.Listener = l
	}
	s.srv.Start()
	s.URL = s.srv.URL + "/"
	if o.Card {
		mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{
			Name: "a2a-go test agent", Description: "Suspends a turn on an approval-request.",
			URL: s.URL, PreferredTransport: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0",
			Capabilities: a2a.AgentCapabilities{PushNotifications: o.Push},
			Version:      "1.0.0", DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"},
			Skills: []a2a.AgentSkill{{ID: "travel", Name: "Travel", Description: "Books flights.", Tags: []string{"travel"}}}}))
	}
	return s
}

// calls records the SendMessage and GetTask calls the agent serves.
type calls struct{ s *Server }

func (c calls) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, error) {
	m := strings.TrimPrefix(cc.Method(), "On")
	if m == "SendMessage" || m == "GetTask" {
		c.s.event(Event{Kind: "call", Method: m})
	}
	if m == "GetTask" && c.s.failGet {
		return ctx, errors.New("the task store is unavailable")
	}
	return ctx, nil
}

func (calls) After(context.Context, *a2asrv.CallContext, *a2asrv.Response) error { return nil }

// sender is a2a-go's HTTP push sender, recording each push.
type sender struct {
	s    *Server
	http *push.HTTPPushSender
}

func (p *sender) SendPush(ctx context.Context, cfg *a2a.PushConfig, task *a2a.Task) error {
	err := p.http.SendPush(ctx, cfg, task)
	e := Event{Kind: "push", State: string(task.Status.State)}
	if err != nil {
		e.Err = err.Error()
	}
	p.s.event(e)
	return nil // a refused push does not stop the task
}

func (s *Server) event(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}

// Events returns the calls served and the pushes sent so far, in order.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Received returns a copy of the approval-responses received so far.
func (s *Server) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// Contexts returns the contextId of every new turn started so far (not
// resumptions), in arrival order.
func (s *Server) Contexts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.contexts...)
}

// Notify is signalled (without blocking) after each received response.
func (s *Server) Notify() <-chan struct{} { return s.notify }

type executor struct{ s *Server }

func (e *executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	msg := rc.Message
	if rc.StoredTask != nil {
		for _, p := range msg.Parts {
			dp, ok := p.(a2a.DataPart)
			if !ok || dp.Metadata["partType"] != envelope.PartApprovalResponse {
				continue
			}
			b, _ := json.Marshal(dp.Data)
			var ar envelope.ApprovalResponse
			_ = json.Unmarshal(b, &ar)
			e.s.mu.Lock()
			e.s.received = append(e.s.received, Received{ContextID: msg.ContextID, TaskID: string(msg.TaskID),
				MessageID: msg.ID, Response: ar, Raw: dp.Data, Metadata: dp.Metadata, At: time.Now()})
			e.s.mu.Unlock()
			select {
			case e.s.notify <- struct{}{}:
			default:
			}
		}
		done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: "Resumed."}))
		done.Final = true
		return q.Write(ctx, done)
	}
	e.s.mu.Lock()
	e.s.contexts = append(e.s.contexts, rc.ContextID)
	e.s.mu.Unlock()
	text := ""
	for _, p := range msg.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			text += tp.Text
		}
	}
	if strings.HasPrefix(text, "echo:") {
		return q.Write(ctx, &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleAgent, ContextID: rc.ContextID,
			Parts: a2a.ContentParts{a2a.TextPart{Text: fmt.Sprintf("Received %d parts.", len(msg.Parts))},
				a2a.DataPart{Data: echo(msg), Metadata: map[string]any{"partType": "echo"}}}})
	}
	if r, ok := strings.CutPrefix(text, "reply:"); ok {
		return q.Write(ctx, &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleAgent, ContextID: rc.ContextID,
			Parts: a2a.ContentParts{a2a.TextPart{Text: r}}})
	}
	if err := q.Write(ctx, a2a.NewSubmittedTask(rc, msg)); err != nil {
		return err
	}
	if reason, ok := strings.CutPrefix(text, "fail:"); ok {
		ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateFailed,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: reason}))
		ev.Final = true
		return q.Write(ctx, ev)
	}
	if strings.HasPrefix(text, "hang:") {
		return q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil))
	}
	if r, ok := strings.CutPrefix(text, "slow:"); ok {
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(e.s.slow):
		}
		text = r
	}
	if strings.HasPrefix(text, "brief:") {
		art := a2a.NewArtifactEvent(rc,
			a2a.TextPart{Text: "Good morning. Three tasks today.", Metadata: map[string]any{"partType": "response"}},
			a2a.DataPart{Data: map[string]any{"tasks": []any{"pack", "book taxi", "call Bob"}},
				Metadata: map[string]any{"partType": "domain-data", "slotKey": "today"}})
		if err := q.Write(ctx, art); err != nil {
			return err
		}
		done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
		done.Final = true
		return q.Write(ctx, done)
	}
	if id, ok := strings.CutPrefix(text, "approve:"); ok {
		req := map[string]any{"approvalId": id, "toolName": "book_flight", "toolCallId": "call-" + id,
			"args": map[string]any{"flight": "BA2043", "seats": 6}, "handler": "travel",
			"turn": string(rc.TaskID), "session": rc.ContextID, "summary": "Book BA2043 for 6 people"}
		ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateInputRequired, a2a.NewMessageForTask(a2a.MessageRoleAgent, rc,
			a2a.TextPart{Text: "I need your approval to book BA2043.", Metadata: map[string]any{"partType": "response"}},
			a2a.DataPart{Data: req, Metadata: map[string]any{"partType": envelope.PartApprovalRequest}}))
		ev.Final = true
		return q.Write(ctx, ev)
	}
	art := a2a.NewArtifactEvent(rc, a2a.TextPart{Text: "Today's brief: " + text},
		a2a.DataPart{Data: map[string]any{"tasks": 3}})
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

// Echo is what the "echo:" answer describes: the message as the agent
// received it, each file by name, type and size (its bytes decoded) or URI.
// Part kinds use A2A 1.0 names (text, raw, url, data), like the JS peer's.
type Echo struct {
	ContextID string         `json:"contextId"`
	MessageID string         `json:"messageId"`
	Metadata  map[string]any `json:"metadata"`
	Parts     []EchoPart     `json:"parts"`
}

// EchoPart is one part of an Echo.
type EchoPart struct {
	Kind      string         `json:"kind"`
	Filename  string         `json:"filename"`
	MediaType string         `json:"mediaType"`
	Metadata  map[string]any `json:"metadata"`
	Text      string         `json:"text,omitempty"`
	Size      int            `json:"size,omitempty"`
	URL       string         `json:"url,omitempty"`
	Data      any            `json:"data,omitempty"`
}

func echo(msg *a2a.Message) map[string]any {
	e := Echo{ContextID: msg.ContextID, MessageID: msg.ID, Metadata: msg.Metadata}
	for _, p := range msg.Parts {
		var ep EchoPart
		switch p := p.(type) {
		case a2a.TextPart:
			ep = EchoPart{Kind: "text", Text: p.Text, Metadata: p.Metadata}
		case a2a.DataPart:
			ep = EchoPart{Kind: "data", Data: p.Data, Metadata: p.Metadata}
		case a2a.FilePart:
			ep.Metadata = p.Metadata
			switch f := p.File.(type) {
			case a2a.FileBytes:
				b, err := base64.StdEncoding.DecodeString(f.Bytes)
				if err != nil {
					b = nil
				}
				ep.Kind, ep.Filename, ep.MediaType, ep.Size = "raw", f.Name, f.MimeType, len(b)
			case a2a.FileURI:
				ep.Kind, ep.Filename, ep.MediaType, ep.URL = "url", f.Name, f.MimeType, f.URI
			}
		}
		e.Parts = append(e.Parts, ep)
	}
	b, _ := json.Marshal(e)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func (e *executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}
