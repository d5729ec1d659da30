package agent

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/envelope"
)

// Version settings of a target.
const (
	VersionAuto = "auto"
)

// Defaults of a target.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultCardTimeout      = 5 * time.Second
	DefaultCardTTL          = time.Hour
	DefaultMaxResponseBytes = 8 << 20
	DefaultMaxCardBytes     = 256 << 10
)

// Target is one agent.
type Target struct {
	// URL is the agent's A2A endpoint (http or https); its origin is where
	// the agent card is read, and the only origin requests go to.
	URL string
	// Version is "auto" (or empty), "1.0" or "0.3". A fixed 0.3 talks
	// JSON-RPC to URL without reading the card; a fixed 1.0 reads the card
	// for the binding unless Binding is fixed too.
	Version string
	// Binding is "auto" (or empty), "jsonrpc" or "http+json" (ParseBinding).
	// A fixed binding is used as it is; with Version 1.0 too, URL is the
	// endpoint and no card is read. "http+json" needs Version auto or 1.0.
	Binding string
	// Headers are added to every request (authorisation, for instance).
	Headers map[string]string
	// Timeout bounds one request; zero means 30s.
	Timeout time.Duration
	// CardTimeout bounds one card read; zero means 5s.
	CardTimeout time.Duration
	// CardTTL is how long a card read is trusted; zero means an hour. The
	// card is also read again when the agent answers "version not
	// supported" or "method not found".
	CardTTL time.Duration
	// MaxResponseBytes bounds an answer; zero means 8 MiB.
	MaxResponseBytes int64
	// MaxCardBytes bounds a card; zero means 256 KiB.
	MaxCardBytes int64
}

// ParseBinding reads a binding setting: "auto" or "" (the card decides),
// "jsonrpc" or "http+json" (either case), and returns "" for auto or
// BindingJSONRPC / BindingHTTPJSON.
func ParseBinding(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", VersionAuto:
		return "", nil
	case "jsonrpc":
		return BindingJSONRPC, nil
	case "http+json":
		return BindingHTTPJSON, nil
	}
	return "", fmt.Errorf("a2a_binding %q must be auto, jsonrpc or http+json", clip(s))
}

// Client talks to the configured agents. It is safe for concurrent use.
type Client struct {
	targets map[string]*conn
	now     func() time.Time
	push    *Pushes
}

// UsePush makes the turns this client starts ask for push notifications
// (received by p) wherever the agent's card says it sends them. Call it
// before the first turn.
func (c *Client) UsePush(p *Pushes) { c.push = p }

// New builds a client for targets. Every target gets its own HTTP client
// (fetch.EndpointClient): it never follows a redirect — a 3xx answer is a
// *RedirectError — and dials only the target URL's host:port or public
// addresses. hc, when not nil, replaces those clients (tests); redirects
// are refused all the same. No request is made until first use.
func New(targets map[string]Target, hc *http.Client) (*Client, error) {
	if hc != nil {
		cp := *hc
		cp.CheckRedirect = fetch.NoRedirects
		hc = &cp
	}
	c := &Client{targets: map[string]*conn{}, now: time.Now}
	for name, t := range targets {
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("agent %q: a2a_url %q must be an absolute http(s) URL", name, t.URL)
		}
		switch t.Version {
		case "":
			t.Version = VersionAuto
		case VersionAuto, V10, V03:
		default:
			return nil, fmt.Errorf("agent %q: a2a_version %q must be auto, 1.0 or 0.3", name, t.Version)
		}
		if t.Binding, err = ParseBinding(t.Binding); err != nil {
			return nil, fmt.Errorf("agent %q: %w", name, err)
		}
		if t.Version == V03 && t.Binding == BindingHTTPJSON {
			return nil, fmt.Errorf("agent %q: a2a_binding http+json needs a2a_version 1.0 or auto (beachd speaks 0.3 over JSON-RPC only)", name)
		}
		t.Timeout = orDefault(t.Timeout, DefaultTimeout)
		t.CardTimeout = orDefault(t.CardTimeout, DefaultCardTimeout)
		t.CardTTL = orDefault(t.CardTTL, DefaultCardTTL)
		t.MaxResponseBytes = orDefault(t.MaxResponseBytes, DefaultMaxResponseBytes)
		t.MaxCardBytes = orDefault(t.MaxCardBytes, DefaultMaxCardBytes)
		thc := hc
		if thc == nil {
			if thc, err = fetch.EndpointClient(t.URL, 0); err != nil {
				return nil, fmt.Errorf("agent %q: %w", name, err)
			}
		}
		c.targets[name] = &conn{name: name, t: t, now: c.now,
			c: &caller{hc: thc, headers: t.Headers, maxBytes: t.MaxResponseBytes}}
	}
	return c, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Has reports whether an agent of that name is configured.
func (c *Client) Has(name string) bool { _, ok := c.targets[name]; return ok }

func (c *Client) target(name string) (*conn, error) {
	t, ok := c.targets[name]
	if !ok {
		return nil, fmt.Errorf("agent %q: %w", name, errors.Join(ErrUnknownAgent, ErrPermanent))
	}
	return t, nil
}

// IsPermanent reports whether err is one that retrying the same request
// cannot fix.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// Inject sends resp into the suspended turn (session, turn) of agentName:
// a message with contextId = session and taskId = turn, carrying one data
// part {approvalId, decision, reason, decidedBy, decidedAt} whose metadata
// says partType "approval-response" (SendMessage in 1.0, message/send in
// 0.3). The request returns at once: the resumed turn runs on. The message
// id is stable per approval, so an agent can recognise a repeat.
func (c *Client) Inject(ctx context.Context, agentName, session, turn string, resp envelope.ApprovalResponse) error {
	t, err := c.target(agentName)
	if err != nil {
		return err
	}
	data := map[string]any{
		"approvalId": resp.ApprovalID,
		"decision":   resp.Decision,
		"decidedAt":  resp.DecidedAt.UTC().Format(time.RFC3339Nano),
	}
	if resp.Reason != "" {
		data["reason"] = resp.Reason
	}
	if resp.DecidedBy != "" {
		data["decidedBy"] = resp.DecidedBy
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode approval-response: %w", err)
	}
	msg := &Message{
		MessageID: InjectMessageID(resp.ApprovalID),
		Role:      RoleUser,
		ContextID: session,
		TaskID:    turn,
		Parts:     Parts{{Data: raw, Metadata: map[string]any{"partType": envelope.PartApprovalResponse}}},
	}
	err = t.call(ctx, func(ctx context.Context, b binding) error {
		_, _, err := b.send(ctx, msg, true, nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("inject approval-response into %s: %w", agentName, err)
	}
	return nil
}

// InjectMessageID is the messageId of the message Inject sends for an
// approval: the same for every attempt, so that an agent — and
// HasDecision — can recognise a repeat.
func InjectMessageID(approvalID string) string { return "beachd-approval-" + approvalID }

// HasDecision reports whether the agent already holds the decision resp
// in turn: it reads the task (GetTask / tasks/get) and looks in its
// history for the message Inject sends (InjectMessageID), or for an
// approval-response data part of resp's approvalId. It is how a retried
// injection that the agent refuses — because the first attempt got
// through, its answer was lost, and the agent has since completed the
// task — is told apart from one that never arrived. A task of another
// context than session is not the turn. An agent that keeps no history
// yields false: nothing proves it had the decision.
func (c *Client) HasDecision(ctx context.Context, agentName, session, turn string, resp envelope.ApprovalResponse) (bool, error) {
	task, err := c.Task(ctx, agentName, turn)
	if err != nil {
		return false, err
	}
	if session != "" && task.ContextID != "" && task.ContextID != session {
		return false, nil
	}
	want := InjectMessageID(resp.ApprovalID)
	for _, m := range task.History {
		if m.Role != RoleUser {
			continue
		}
		if m.MessageID == want {
			return true, nil
		}
		for _, p := range m.Parts {
			if p.Data == nil || p.Metadata["partType"] != envelope.PartApprovalResponse {
				continue
			}
			var d struct {
				ApprovalID string `json:"approvalId"`
			}
			if json.Unmarshal(p.Data, &d) == nil && d.ApprovalID == resp.ApprovalID {
				return true, nil
			}
		}
	}
	return false, nil
}

// Task reads the task id of agentName as the agent holds it now (GetTask
// in 1.0, tasks/get in 0.3).
func (c *Client) Task(ctx context.Context, agentName, id string) (*Task, error) {
	t, err := c.target(agentName)
	if err != nil {
		return nil, err
	}
	var task *Task
	err = t.call(ctx, func(ctx context.Context, b binding) error {
		var err error
		task, err = b.getTask(ctx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get task %s on %s: %w", clip(id), agentName, err)
	}
	return task, nil
}

// Turn is a turn started by StartTurn: either the agent answered at once
// with a Message, or it created a Task to poll.
type Turn struct {
	ContextID string
	TaskID    string
	Message   *Message // set when the agent replied with a message
	Task      *Task    // the latest task snapshot, when there is a task
	// PushID is beachd's id of the turn in its push URL, when the turn
	// asked for push notifications.
	PushID string
	// AnsweredBy says how WaitTurn learned the answer: AnsweredByMessage,
	// AnsweredByPush or AnsweredByPoll.
	AnsweredBy string

	push *pushTurn
}

// StartTurn sends text as a new user message (in contextID, when given) and
// returns what the agent answered. The request returns at once.
func (c *Client) StartTurn(ctx context.Context, agentName, text, contextID string) (*Turn, error) {
	return c.SendMessage(ctx, agentName, &Message{MessageID: randomID(), Role: RoleUser, ContextID: contextID,
		Parts: Parts{TextPart(text, nil)}})
}

// SendMessage sends msg, a user message the caller built — its MessageID
// (sent unchanged, so that an agent recognises a repeat; a random one when
// empty), ContextID (the conversation), Parts (text, data and file parts:
// Raw bytes or a URL, with Filename and MediaType) and Metadata — in the
// agent's generation, and returns what the agent answered: a Message, or a
// Task to wait for with WaitTurn. The request returns at once. msg is not
// modified.
func (c *Client) SendMessage(ctx context.Context, agentName string, msg *Message) (*Turn, error) {
	t, err := c.target(agentName)
	if err != nil {
		return nil, err
	}
	if err := checkOutgoing(msg); err != nil {
		return nil, fmt.Errorf("send message to %s: %w", agentName, errors.Join(err, ErrPermanent))
	}
	m := *msg
	if m.MessageID == "" {
		m.MessageID = randomID()
	}
	if m.Role == "" {
		m.Role = RoleUser
	}
	var pt *pushTurn
	var pc *pushConfig
	if c.push != nil && t.current(ctx).Push {
		pt = c.push.register(ctx, agentName)
		pc = &pushConfig{URL: c.push.URL(pt.id), Token: c.push.Token(pt.id)}
	}
	var turn *Turn
	err = t.call(ctx, func(ctx context.Context, b binding) error {
		am, task, err := b.send(ctx, &m, true, pc)
		switch {
		case err != nil:
			return err
		case am != nil:
			turn = &Turn{ContextID: cmp.Or(am.ContextID, m.ContextID), TaskID: am.TaskID, Message: am}
		default:
			turn = &Turn{ContextID: cmp.Or(task.ContextID, m.ContextID), TaskID: task.ID, Task: task}
		}
		return nil
	})
	if err != nil {
		if pt != nil {
			c.push.release(pt)
		}
		return nil, fmt.Errorf("send message %s to %s: %w", clip(m.MessageID), agentName, err)
	}
	if pt != nil {
		if turn.Task == nil {
			c.push.release(pt)
		} else {
			c.push.setTask(pt, turn.TaskID)
			turn.push, turn.PushID = pt, pt.id
		}
	}
	return turn, nil
}

// ResumeTurn is a turn a previous process started and left in flight at
// the agent — its task taskID in contextID, recorded —, to wait for with
// WaitTurn. pushID is the turn's push id as SendMessage gave it
// (Turn.PushID), "" when it asked for no pushes: the turn accepts pushes
// under it again — the URL and token the agent holds — so that an update
// the agent pushes after the restart answers it; on a shared store, this
// replica becomes the one that waits for them. A push id that is not one
// beachd makes is ignored (the turn is polled).
func (c *Client) ResumeTurn(ctx context.Context, agentName, contextID, taskID, pushID string) *Turn {
	turn := &Turn{ContextID: contextID, TaskID: taskID}
	if c.push == nil || pushID == "" || !c.Has(agentName) {
		return turn
	}
	if !ValidPushID(pushID) {
		c.push.log.Warn("a2a push: a resumed turn's recorded push id is malformed; polling it", "agent", agentName,
			"task", clip(taskID), "push_id", clip(pushID))
		return turn
	}
	pt := c.push.registerID(ctx, agentName, pushID)
	c.push.setTask(pt, taskID)
	turn.push, turn.PushID = pt, pt.id
	return turn
}

// checkOutgoing refuses a message no agent could read: a role other than
// user, no part, or a part without exactly one content.
func checkOutgoing(m *Message) error {
	if m == nil {
		return errors.New("no message")
	}
	if m.Role != "" && m.Role != RoleUser {
		return fmt.Errorf("message role %q: a client sends ROLE_USER messages", m.Role)
	}
	if len(m.Parts) == 0 {
		return errors.New("message has no parts")
	}
	for i, p := range m.Parts {
		n := 0
		for _, set := range []bool{p.Text != nil, p.Data != nil, p.URL != "", p.Raw != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("part %d must have exactly one of text, data, url, raw (it has %d)", i, n)
		}
	}
	return nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "beachd-" + hex.EncodeToString(b[:])
}

// WaitTurn waits until turn settles — its task reaches a terminal state, or
// input-required / auth-required (the turn is suspended, typically on an
// approval) — polling the task every poll (default 500ms) until ctx ends,
// and returns the reply as a settled envelope. A turn that asked for push
// notifications returns as soon as the pushes say it settled (when they
// missed nothing of the task, else after one more read of it), and is
// polled every poll × PushPollFactor meanwhile, in case pushes stop;
// either way WaitTurn returns the answer once. turn.AnsweredBy says which
// way it came.
func (c *Client) WaitTurn(ctx context.Context, agentName string, turn *Turn, poll time.Duration) (*envelope.Envelope, error) {
	if turn.push != nil {
		defer c.push.release(turn.push)
	}
	turn.AnsweredBy = AnsweredBySend
	if turn.Message != nil && turn.Task == nil {
		return MessageEnvelope(turn.Message, "complete", c.now()), nil
	}
	t, err := c.target(agentName)
	if err != nil {
		return nil, err
	}
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	var wake <-chan struct{}
	if turn.push != nil {
		poll *= PushPollFactor
		wake = turn.push.wake
	}
	task := turn.Task
	for {
		if task != nil && task.Status.State.Settled() {
			turn.Task = task
			return TaskEnvelope(task, c.now()), nil
		}
		if task != nil {
			pushed, err := c.waitPush(ctx, turn, poll, wake)
			if err != nil {
				return nil, fmt.Errorf("wait for turn %s on %s: %w", turn.TaskID, agentName, err)
			}
			if pushed != nil {
				turn.Task, turn.AnsweredBy = pushed, AnsweredByPush
				return TaskEnvelope(pushed, c.now()), nil
			}
		}
		turn.AnsweredBy = AnsweredByPoll
		err = t.call(ctx, func(ctx context.Context, b binding) error {
			var err error
			task, err = b.getTask(ctx, turn.TaskID)
			return err
		})
		if err == nil && turn.push != nil {
			c.push.seed(turn.push, task)
		}
		if err != nil {
			if IsPermanent(err) || ctx.Err() != nil {
				return nil, fmt.Errorf("get task %s on %s: %w", turn.TaskID, agentName, err)
			}
			task = nil
			// A failed read waits like a poll, and a push that settles
			// the turn meanwhile answers it.
			pushed, serr := c.waitPush(ctx, turn, poll, wake)
			if serr != nil {
				return nil, fmt.Errorf("wait for turn %s on %s: %w (last error: %v)", turn.TaskID, agentName, serr, err)
			}
			if pushed != nil {
				turn.Task, turn.AnsweredBy = pushed, AnsweredByPush
				return TaskEnvelope(pushed, c.now()), nil
			}
		}
	}
}

// waitPush waits poll, or until a push says the turn settled: it returns
// the pushed task then, nil when it is time to poll (the poll is due, or
// the pushes said the turn settled but missed part of its task).
func (c *Client) waitPush(ctx context.Context, turn *Turn, poll time.Duration, wake <-chan struct{}) (*Task, error) {
	if wake == nil {
		return nil, sleep(ctx, poll)
	}
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		if task, ok := c.push.settled(turn.push); ok {
			return task, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			// Before asking the agent: the pushes other replicas
			// received, in case their wake-up was lost.
			if c.push.takeRelayed(ctx, turn.push, true) {
				if task, ok := c.push.settled(turn.push); ok {
					return task, nil
				}
			}
			return nil, nil
		case <-wake:
			c.push.takeRelayed(ctx, turn.push, false)
			if c.push.needsPoll(turn.push) {
				return nil, nil
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Status is what beachd knows of how it talks to one agent.
type Status struct {
	Name       string `json:"name"`
	URL        string `json:"url"`
	Configured string `json:"a2aVersion"` // auto, 1.0 or 0.3
	// ConfiguredBinding is auto, jsonrpc or http+json.
	ConfiguredBinding string    `json:"a2aBinding"`
	Generation        string    `json:"generation,omitempty"` // in use; "" until first contact
	Binding           string    `json:"binding,omitempty"`
	Endpoint          string    `json:"endpoint,omitempty"`
	ChosenBy          string    `json:"chosenBy,omitempty"` // config, card, or probe
	CardReadAt        time.Time `json:"cardReadAt,omitzero"`
	CardError         string    `json:"cardError,omitempty"`
}

// Status returns the state of one agent.
func (c *Client) Status(name string) (Status, bool) {
	t, ok := c.targets[name]
	if !ok {
		return Status{}, false
	}
	return t.status(), true
}

// Statuses returns the state of every agent, by name.
func (c *Client) Statuses() []Status {
	out := make([]Status, 0, len(c.targets))
	for _, t := range c.targets {
		out = append(out, t.status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Resolve chooses the generation of every agent that has none yet (reading
// cards where the version is auto), so that operators see it before the
// first turn. Errors are recorded in each agent's Status.
func (c *Client) Resolve(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range c.targets {
		wg.Go(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.cur == nil {
				t.resolveLocked(ctx)
			}
		})
	}
	wg.Wait()
}
