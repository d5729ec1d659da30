package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
)

// devAgentName is the agent `beachd dev` configures: an a2a-go agent served
// by beachd itself under /dev/agent/, so that approval decisions and cron
// turns have somewhere real to go on a fresh machine.
const devAgentName = "dev"

// devAgent is a tiny A2A agent: it records every approval-response injected
// into a task, and answers a new message with a short response (a
// scheduled turn's result).
type devAgent struct {
	mu       sync.Mutex
	received []devReceived
	tasks    devTasks
	// now stamps receipts; tests measuring latency read the stamps.
	now func() time.Time
}

// devTasks is the dev agent's task store. A decision for a turn the agent
// never started (the sample envelopes name turns of an imaginary agent) is
// accepted: adoptUnknownTask creates the suspended task first.
type devTasks struct {
	mu    sync.Mutex
	tasks map[a2a.TaskID]*a2a.Task
}

func (t *devTasks) Save(ctx context.Context, task *a2a.Task) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tasks == nil {
		t.tasks = map[a2a.TaskID]*a2a.Task{}
	}
	if len(t.tasks) > 10000 {
		t.tasks = map[a2a.TaskID]*a2a.Task{} // a dev agent forgets rather than grows
	}
	c := *task
	t.tasks[task.ID] = &c
	return nil
}

func (t *devTasks) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	task, ok := t.tasks[id]
	if !ok {
		return nil, a2a.ErrTaskNotFound
	}
	c := *task
	return &c, nil
}

// Before adopts an unknown task named by an incoming message as a task
// suspended on input (a2asrv.CallInterceptor).
func (d *devAgent) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, error) {
	p, ok := req.Payload.(*a2a.MessageSendParams)
	if !ok || p.Message == nil || p.Message.TaskID == "" {
		return ctx, nil
	}
	if _, err := d.tasks.Get(ctx, p.Message.TaskID); err == nil {
		return ctx, nil
	}
	now := time.Now()
	return ctx, d.tasks.Save(ctx, &a2a.Task{ID: p.Message.TaskID, ContextID: p.Message.ContextID,
		Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired, Timestamp: &now}})
}

// After implements a2asrv.CallInterceptor.
func (d *devAgent) After(context.Context, *a2asrv.CallContext, *a2asrv.Response) error { return nil }

type devReceived struct {
	ContextID string                    `json:"contextId"`
	TaskID    string                    `json:"taskId"`
	Response  envelope.ApprovalResponse `json:"approvalResponse"`
	At        time.Time                 `json:"at"`
}

func (d *devAgent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	msg := rc.Message
	var text strings.Builder
	for _, p := range msg.Parts {
		switch p := p.(type) {
		case a2a.DataPart:
			if p.Metadata["partType"] != envelope.PartApprovalResponse {
				continue
			}
			b, _ := json.Marshal(p.Data)
			var ar envelope.ApprovalResponse
			_ = json.Unmarshal(b, &ar)
			d.mu.Lock()
			d.received = append(d.received, devReceived{ContextID: msg.ContextID, TaskID: string(msg.TaskID), Response: ar, At: d.now()})
			if len(d.received) > 1000 {
				d.received = d.received[len(d.received)-1000:]
			}
			d.mu.Unlock()
		case a2a.TextPart:
			text.WriteString(p.Text)
		}
	}
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, msg)); err != nil {
			return err
		}
	}
	reply := "Resumed."
	if rc.StoredTask == nil {
		reply = "The dev agent received: " + text.String()
	}
	done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, rc,
		a2a.TextPart{Text: reply, Metadata: map[string]any{"partType": envelope.PartResponse}}))
	done.Final = true
	return q.Write(ctx, done)
}

func (d *devAgent) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// routes mounts the agent's JSON-RPC endpoint and a listing of what it
// received. Both are dev-only and unauthenticated, on loopback.
// receivedFor returns when the agent received the decision of approval id.
func (d *devAgent) receivedFor(id string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.received {
		if r.Response.ApprovalID == id {
			return r.At, true
		}
	}
	return time.Time{}, false
}

func (d *devAgent) routes(log *slog.Logger) []api.Route {
	h := a2asrv.NewHandler(d, a2asrv.WithLogger(log), a2asrv.WithTaskStore(&d.tasks), a2asrv.WithCallInterceptor(d))
	rpc := a2asrv.NewJSONRPCHandler(h)
	list := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		out := append([]devReceived{}, d.received...)
		d.mu.Unlock()
		api.WriteJSON(w, http.StatusOK, map[string]any{"received": out})
	})
	return []api.Route{
		{Method: "POST", Pattern: "/dev/agent/", Handler: rpc},
		{Method: "GET", Pattern: "/dev/agent/received", Handler: list},
	}
}
