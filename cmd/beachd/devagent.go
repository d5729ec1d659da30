package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/push"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
)

// devAgentName is the agent `beachd dev` configures: an agent served by
// beachd itself under /dev/agent/, so that approval decisions and cron
// turns have somewhere real to go on a fresh machine. It speaks A2A 1.0
// (hand-written JSON-RPC, below) or, with `beachd dev --agent-a2a 0.3`,
// A2A 0.3 (an a2a-go server), and publishes the matching agent card at
// /.well-known/agent-card.json, so that a2a_version auto is exercised.
const devAgentName = "dev"

// devAgent is a tiny A2A agent: it records every approval-response injected
// into a task, answers a message in a conversation by saying what it
// received (see converse), and answers any other new message with a short
// response (a scheduled turn's result).
type devAgent struct {
	// generation is agent.V10 or agent.V03.
	generation string
	mu         sync.Mutex
	received   []devReceived
	tasks      devTasks
	tasks10    map[string]*agent.Task
	// now stamps receipts; tests measuring latency read the stamps.
	now func() time.Time
	// conversations counts the turns of each conversation (by contextId).
	conversations map[string]*devConversation
	// fetch reads attachments given by a URL under fetchBase (beachd's
	// public URL: signed attachment links), to tell their size; nil: it
	// does not.
	fetch     *http.Client
	fetchBase string
	// pushes counts the push notifications the agent sent and beachd
	// accepted (2xx).
	pushes int
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
// A new message whose request names beachd's push URL gets a gate: its
// task is answered working, and completes (and is pushed) once the answer
// is out (After), as the 1.0 dev agent's does.
func (d *devAgent) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, error) {
	p, ok := req.Payload.(*a2a.MessageSendParams)
	if !ok || p.Message == nil {
		return ctx, nil
	}
	if p.Message.TaskID == "" {
		if p.Config != nil && p.Config.PushConfig != nil && d.ownPushURL(p.Config.PushConfig.URL) {
			ctx = context.WithValue(ctx, devGateKey{}, make(chan struct{}))
		}
		return ctx, nil
	}
	if _, err := d.tasks.Get(ctx, p.Message.TaskID); err == nil {
		return ctx, nil
	}
	now := time.Now()
	return ctx, d.tasks.Save(ctx, &a2a.Task{ID: p.Message.TaskID, ContextID: p.Message.ContextID,
		Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired, Timestamp: &now}})
}

// After opens a new task's gate (Before): its answer is out.
func (d *devAgent) After(ctx context.Context, _ *a2asrv.CallContext, _ *a2asrv.Response) error {
	if gate, ok := ctx.Value(devGateKey{}).(chan struct{}); ok {
		close(gate)
	}
	return nil
}

// devGateKey holds a new task's gate in its request's context, which
// a2a-go passes on to Execute.
type devGateKey struct{}

// ownPushURL reports whether url is beachd's own push URL, the only one
// the dev agent posts to.
func (d *devAgent) ownPushURL(url string) bool {
	return d.fetchBase != "" && strings.HasPrefix(url, strings.TrimRight(d.fetchBase, "/")+agent.PushPath)
}

type devReceived struct {
	ContextID string                    `json:"contextId"`
	TaskID    string                    `json:"taskId"`
	Response  envelope.ApprovalResponse `json:"approvalResponse"`
	At        time.Time                 `json:"at"`
}

// record keeps an injected approval-response.
func (d *devAgent) record(contextID, taskID string, data []byte) {
	var ar envelope.ApprovalResponse
	_ = json.Unmarshal(data, &ar)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.received = append(d.received, devReceived{ContextID: contextID, TaskID: taskID, Response: ar, At: d.now()})
	if len(d.received) > 1000 {
		d.received = d.received[len(d.received)-1000:]
	}
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
			d.record(msg.ContextID, string(msg.TaskID), b)
		case a2a.TextPart:
			text.WriteString(p.Text)
		}
	}
	if rc.StoredTask == nil {
		if in := input03(msg); in.conversational() {
			return q.Write(ctx, &a2a.Message{ID: "dev-" + randomToken(10), Role: a2a.MessageRoleAgent, ContextID: rc.ContextID,
				Parts: a2a.ContentParts{a2a.TextPart{Text: d.converse(ctx, in), Metadata: map[string]any{"partType": envelope.PartResponse}}}})
		}
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, msg)); err != nil {
			return err
		}
		if gate, ok := ctx.Value(devGateKey{}).(chan struct{}); ok {
			if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
				return err
			}
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Second):
			}
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

// routes mounts the agent's JSON-RPC endpoint (A2A 1.0 or 0.3), its card
// at base's origin, and a listing of what it received. All are dev-only
// and unauthenticated, on loopback.
func (d *devAgent) routes(base string, log *slog.Logger) []api.Route {
	var rpc http.Handler
	var card map[string]any
	endpoint := base + "/dev/agent/"
	if d.generation == agent.V03 {
		// a2a-go's push notifications: the whole task, after each of its
		// events, to beachd's own push URL only (devPush03).
		h := a2asrv.NewHandler(d, a2asrv.WithLogger(log), a2asrv.WithTaskStore(&d.tasks), a2asrv.WithCallInterceptor(d),
			a2asrv.WithPushNotifications(push.NewInMemoryStore(), devPush03{d}))
		rpc = a2asrv.NewJSONRPCHandler(h)
		card = map[string]any{"url": endpoint, "protocolVersion": "0.3.0", "preferredTransport": agent.BindingJSONRPC,
			"capabilities": map[string]any{"pushNotifications": true}}
	} else {
		rpc = http.HandlerFunc(d.serve10)
		card = map[string]any{"supportedInterfaces": []map[string]any{
			{"url": endpoint, "protocolBinding": agent.BindingJSONRPC, "protocolVersion": agent.V10}},
			"capabilities": map[string]any{"pushNotifications": true}}
	}
	card["name"], card["description"], card["version"] = "beachd dev agent", "Records injected approval decisions; converses (quotes your text, names your attachments, counts the turns); answers every message.", "1.0.0"
	cardHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.WriteJSON(w, http.StatusOK, card) })
	list := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		out := append([]devReceived{}, d.received...)
		d.mu.Unlock()
		api.WriteJSON(w, http.StatusOK, map[string]any{"received": out})
	})
	return []api.Route{
		{Method: "POST", Pattern: "/dev/agent/", Handler: rpc},
		{Method: "GET", Pattern: "/dev/agent/received", Handler: list},
		{Method: "GET", Pattern: agent.CardPath, Handler: cardHandler},
	}
}

// rpcAnswer is a JSON-RPC 2.0 response of the 1.0 dev agent.
type rpcAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcFault       `json:"error,omitempty"`
}

type rpcFault struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    []any  `json:"data,omitempty"`
}

func fault(code int, reason, msg string) *rpcFault {
	return &rpcFault{Code: code, Message: msg, Data: []any{map[string]string{
		"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org"}}}
}

// serve10 is the dev agent's A2A 1.0 JSON-RPC endpoint: SendMessage and
// GetTask, refusing requests without A2A-Version: 1.0 as 1.0 agents do.
func (d *devAgent) serve10(w http.ResponseWriter, r *http.Request) {
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	answer := func(result any, f *rpcFault) {
		if req.ID == nil {
			req.ID = json.RawMessage("null")
		}
		api.WriteJSON(w, http.StatusOK, rpcAnswer{JSONRPC: "2.0", ID: req.ID, Result: result, Error: f})
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, devMaxRequest)).Decode(&req); err != nil || req.JSONRPC != "2.0" {
		answer(nil, &rpcFault{Code: -32700, Message: "not a JSON-RPC 2.0 request"})
		return
	}
	if v := r.Header.Get("A2A-Version"); v != agent.V10 {
		answer(nil, fault(-32009, "VERSION_NOT_SUPPORTED", fmt.Sprintf("A2A version %q is not supported; this agent speaks 1.0", v)))
		return
	}
	switch req.Method {
	case "SendMessage":
		var p struct {
			Message       *agent.Message `json:"message"`
			Configuration struct {
				Push *devPushConfig `json:"taskPushNotificationConfig"`
			} `json:"configuration"`
		}
		if err := jsonv2.Unmarshal(req.Params, &p); err != nil || p.Message == nil || p.Message.MessageID == "" {
			answer(nil, fault(-32602, "INVALID_PARAMS", fmt.Sprintf("params: want {message}: %v", err)))
			return
		}
		if in := input10(p.Message); p.Message.TaskID == "" && in.conversational() {
			answer(map[string]any{"message": &agent.Message{MessageID: "dev-" + randomToken(10), Role: agent.RoleAgent,
				ContextID: p.Message.ContextID, Parts: agent.Parts{agent.TextPart(d.converse(r.Context(), in),
					map[string]any{"partType": envelope.PartResponse})}}}, nil)
			return
		}
		if push := p.Configuration.Push; push != nil && d.fetchBase != "" &&
			strings.HasPrefix(push.URL, strings.TrimRight(d.fetchBase, "/")+agent.PushPath) && p.Message.TaskID == "" {
			// A new task with a push URL (beachd's own: the dev agent posts
			// nowhere else): answered working, then completed and pushed,
			// as an agent that works a moment does.
			done := d.handle10(p.Message)
			working := *done
			working.Status = agent.TaskStatus{State: agent.StateWorking, Timestamp: d.now().UTC().Format(time.RFC3339Nano)}
			d.mu.Lock()
			d.tasks10[done.ID] = &working
			d.mu.Unlock()
			answer(map[string]any{"task": &working}, nil)
			go d.pushFinal(*push, done)
			return
		}
		answer(map[string]any{"task": d.handle10(p.Message)}, nil)
	case "GetTask":
		var p struct {
			ID string `json:"id"`
		}
		_ = jsonv2.Unmarshal(req.Params, &p)
		d.mu.Lock()
		t, ok := d.tasks10[p.ID]
		d.mu.Unlock()
		if !ok {
			answer(nil, fault(-32001, "TASK_NOT_FOUND", "task not found: "+p.ID))
			return
		}
		answer(t, nil)
	default:
		answer(nil, &rpcFault{Code: -32601, Message: "method not found: " + req.Method})
	}
}

// devPushConfig is the push notification configuration of a SendMessage
// (A2A 1.0's TaskPushNotificationConfig: url, token).
type devPushConfig struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// devPushClient posts the dev agent's push notifications.
var devPushClient = &http.Client{Timeout: 10 * time.Second}

// pushFinal records task (settled) as the task's state and posts it to the
// push URL ({"task": …}, the token in X-A2A-Notification-Token). A refused
// or failed push is left to beachd's polling.
func (d *devAgent) pushFinal(cfg devPushConfig, task *agent.Task) {
	d.mu.Lock()
	d.tasks10[task.ID] = task
	d.mu.Unlock()
	body, err := json.Marshal(map[string]any{"task": task})
	if err != nil {
		return
	}
	req, err := http.NewRequest(http.MethodPost, cfg.URL, strings.NewReader(string(body)))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(agent.PushTokenHeader, cfg.Token)
	resp, err := devPushClient.Do(req)
	if err != nil {
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		d.mu.Lock()
		d.pushes++
		d.mu.Unlock()
	}
}

// devPush03 sends the 0.3 dev agent's push notifications with a2a-go's
// HTTP sender, to beachd's own push URL (public_url + /v1/a2a/push/) and
// nowhere else a request names. A refused or failed push is left to
// beachd's polling; the task goes on.
type devPush03 struct{ d *devAgent }

var devPushSender03 = push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 10 * time.Second, FailOnError: true})

func (p devPush03) SendPush(ctx context.Context, cfg *a2a.PushConfig, task *a2a.Task) error {
	if !p.d.ownPushURL(cfg.URL) {
		return nil
	}
	if devPushSender03.SendPush(ctx, cfg, task) == nil {
		p.d.mu.Lock()
		p.d.pushes++
		p.d.mu.Unlock()
	}
	return nil
}

// handle10 runs one message: a message into a task (known or not — the
// sample envelopes name turns of an imaginary agent) records its
// approval-responses and completes the task; a new message completes a new
// task with a short reply.
func (d *devAgent) handle10(m *agent.Message) *agent.Task {
	var text strings.Builder
	for _, p := range m.Parts {
		switch {
		case p.Data != nil && p.Metadata["partType"] == envelope.PartApprovalResponse:
			d.record(m.ContextID, m.TaskID, p.Data)
		case p.Text != nil:
			text.WriteString(*p.Text)
		}
	}
	reply := "Resumed."
	id, ctxID := m.TaskID, m.ContextID
	if id == "" {
		reply, id = "The dev agent received: "+text.String(), "dev-"+randomToken(10)
	}
	if ctxID == "" {
		ctxID = "dev-" + randomToken(10)
	}
	task := &agent.Task{ID: id, ContextID: ctxID, Status: agent.TaskStatus{
		State: agent.StateCompleted, Timestamp: d.now().UTC().Format(time.RFC3339Nano),
		Message: &agent.Message{MessageID: "dev-" + randomToken(10), Role: agent.RoleAgent, TaskID: id, ContextID: ctxID,
			Parts: agent.Parts{agent.TextPart(reply, map[string]any{"partType": envelope.PartResponse})}}}}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tasks10 == nil || len(d.tasks10) > 10000 {
		d.tasks10 = map[string]*agent.Task{} // a dev agent forgets rather than grows
	}
	d.tasks10[id] = task
	return task
}

// A conversation with the dev agent. A new message in a conversation (its
// contextId is a conversation id, cnv_…, or it carries a file) is answered
// at once with a Message in the same context that shows what arrived: the
// text quoted, each attachment by name, type and size, and which turn of
// the conversation this is. A repeated message id is the same turn again.
// Other new messages (cron prompts, `beachd` CLI turns) keep their task
// answer.

// devMaxRequest bounds a JSON-RPC request to the 1.0 dev agent: room for
// a message with several attachments inline.
const devMaxRequest = 48 << 20

// devMaxConversations bounds what the dev agent remembers of conversations.
const devMaxConversations = 10000

// devMaxFetch bounds the bytes read of an attachment given by URL (to learn
// its size).
const devMaxFetch = 32 << 20

type devConversation struct {
	turns int
	// byMessage is the turn each message id started (the last few).
	byMessage map[string]int
}

// devFile is one attachment as the dev agent describes it.
type devFile struct {
	name, mediaType, url string
	size                 int64 // -1: unknown
}

// devInput is a new message, whichever generation carried it.
type devInput struct {
	contextID, messageID, text string
	files                      []devFile
	// channel and from: where the person wrote from, when beachd's
	// message metadata ("beach": {channel, from, …}) says.
	channel, from string
}

// beachMeta reads channel and from of a message's "beach" metadata.
func (in *devInput) beachMeta(meta map[string]any) {
	b, _ := meta["beach"].(map[string]any)
	in.channel, _ = b["channel"].(string)
	in.from, _ = b["from"].(string)
}

// conversational reports whether a new message is one to converse on.
func (in devInput) conversational() bool {
	return strings.HasPrefix(in.contextID, "cnv_") || len(in.files) > 0
}

// turnOf counts the turns of a conversation: the turn the message starts,
// or started when its id was seen before.
func (d *devAgent) turnOf(contextID, messageID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conversations == nil || len(d.conversations) > devMaxConversations {
		d.conversations = map[string]*devConversation{} // a dev agent forgets rather than grows
	}
	c := d.conversations[contextID]
	if c == nil {
		c = &devConversation{byMessage: map[string]int{}}
		d.conversations[contextID] = c
	}
	if n, ok := c.byMessage[messageID]; ok && messageID != "" {
		return n
	}
	c.turns++
	if len(c.byMessage) >= 100 {
		clear(c.byMessage)
	}
	c.byMessage[messageID] = c.turns
	return c.turns
}

// converse writes the answer to a conversational message.
func (d *devAgent) converse(ctx context.Context, in devInput) string {
	n := d.turnOf(in.contextID, in.messageID)
	var b strings.Builder
	fmt.Fprintf(&b, "The dev agent, turn %d of conversation %s.", n, in.contextID)
	if in.channel != "" && in.from != "" {
		fmt.Fprintf(&b, " (%s from %s)", clipText(in.channel, 40), clipText(in.from, 200))
	}
	b.WriteString("\n")
	if t := strings.TrimSpace(in.text); t != "" {
		fmt.Fprintf(&b, "You wrote: %q\n", clipText(t, 2000))
	} else {
		b.WriteString("You wrote no text.\n")
	}
	switch len(in.files) {
	case 0:
		b.WriteString("No attachments.")
	case 1:
		b.WriteString("1 attachment:")
	default:
		fmt.Fprintf(&b, "%d attachments:", len(in.files))
	}
	for _, f := range in.files {
		if f.size < 0 && f.url != "" {
			f.size = d.fetchSize(ctx, f.url)
		}
		name, mt := cmp.Or(f.name, "(no name)"), cmp.Or(f.mediaType, "application/octet-stream")
		size := "size unknown"
		if f.size >= 0 {
			size = fmt.Sprintf("%d bytes", f.size)
		}
		fmt.Fprintf(&b, "\n- %s (%s, %s)", name, mt, size)
	}
	return b.String()
}

// fetchSize reads an attachment given by URL to count its bytes; -1 when
// it cannot (no client, a URL not under fetchBase, an error, or over
// devMaxFetch). Only beachd's own links are read: the dev agent fetches
// nothing else on anyone's behalf.
func (d *devAgent) fetchSize(ctx context.Context, u string) int64 {
	if d.fetch == nil || d.fetchBase == "" || !strings.HasPrefix(u, strings.TrimSuffix(d.fetchBase, "/")+"/") {
		return -1
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return -1
	}
	resp, err := d.fetch.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, devMaxFetch+1))
	if err != nil || n > devMaxFetch {
		return -1
	}
	return n
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// input10 reads a new A2A 1.0 message.
func input10(m *agent.Message) devInput {
	in := devInput{contextID: m.ContextID, messageID: m.MessageID}
	in.beachMeta(m.Metadata)
	var text strings.Builder
	for _, p := range m.Parts {
		switch {
		case p.Text != nil:
			if text.Len() > 0 {
				text.WriteString("\n") // text parts are separate pieces (a note follows the person's text)
			}
			text.WriteString(*p.Text)
		case p.Data != nil:
		case p.URL != "":
			in.files = append(in.files, devFile{name: p.Filename, mediaType: p.MediaType, url: p.URL, size: -1})
		default:
			in.files = append(in.files, devFile{name: p.Filename, mediaType: p.MediaType, size: int64(len(p.Raw))})
		}
	}
	in.text = text.String()
	return in
}

// input03 reads a new A2A 0.3 message.
func input03(m *a2a.Message) devInput {
	in := devInput{contextID: m.ContextID, messageID: m.ID}
	in.beachMeta(m.Metadata)
	var text strings.Builder
	for _, p := range m.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			if text.Len() > 0 {
				text.WriteString("\n")
			}
			text.WriteString(p.Text)
		case a2a.FilePart:
			switch f := p.File.(type) {
			case a2a.FileBytes:
				size := int64(-1)
				if b, err := base64.StdEncoding.DecodeString(f.Bytes); err == nil {
					size = int64(len(b))
				}
				in.files = append(in.files, devFile{name: f.Name, mediaType: f.MimeType, size: size})
			case a2a.FileURI:
				in.files = append(in.files, devFile{name: f.Name, mediaType: f.MimeType, url: f.URI, size: -1})
			}
		}
	}
	in.text = text.String()
	return in
}
