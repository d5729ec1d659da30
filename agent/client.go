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
	"sync"
	"time"

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
	// the agent card is read.
	URL string
	// Version is "auto" (or empty), "1.0" or "0.3". A fixed version talks
	// JSON-RPC to URL without reading the card.
	Version string
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

// Client talks to the configured agents. It is safe for concurrent use.
type Client struct {
	targets map[string]*conn
	now     func() time.Time
}

// New builds a client for targets. hc is the HTTP client to use (nil means
// a client with default settings). No request is made until first use.
func New(targets map[string]Target, hc *http.Client) (*Client, error) {
	if hc == nil {
		hc = &http.Client{}
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
		t.Timeout = orDefault(t.Timeout, DefaultTimeout)
		t.CardTimeout = orDefault(t.CardTimeout, DefaultCardTimeout)
		t.CardTTL = orDefault(t.CardTTL, DefaultCardTTL)
		t.MaxResponseBytes = orDefault(t.MaxResponseBytes, DefaultMaxResponseBytes)
		t.MaxCardBytes = orDefault(t.MaxCardBytes, DefaultMaxCardBytes)
		c.targets[name] = &conn{name: name, t: t, now: c.now,
			c: &caller{hc: hc, headers: t.Headers, maxBytes: t.MaxResponseBytes}}
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
		MessageID: "beachd-approval-" + resp.ApprovalID,
		Role:      RoleUser,
		ContextID: session,
		TaskID:    turn,
		Parts:     Parts{{Data: raw, Metadata: map[string]any{"partType": envelope.PartApprovalResponse}}},
	}
	err = t.call(ctx, func(ctx context.Context, b binding) error {
		_, _, err := b.send(ctx, msg, true)
		return err
	})
	if err != nil {
		return fmt.Errorf("inject approval-response into %s: %w", agentName, err)
	}
	return nil
}

// Turn is a turn started by StartTurn: either the agent answered at once
// with a Message, or it created a Task to poll.
type Turn struct {
	ContextID string
	TaskID    string
	Message   *Message // set when the agent replied with a message
	Task      *Task    // the latest task snapshot, when there is a task
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
	var turn *Turn
	err = t.call(ctx, func(ctx context.Context, b binding) error {
		am, task, err := b.send(ctx, &m, true)
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
		return nil, fmt.Errorf("send message %s to %s: %w", clip(m.MessageID), agentName, err)
	}
	return turn, nil
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
// and returns the reply as a settled envelope.
func (c *Client) WaitTurn(ctx context.Context, agentName string, turn *Turn, poll time.Duration) (*envelope.Envelope, error) {
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
	task := turn.Task
	for {
		if task != nil && task.Status.State.Settled() {
			turn.Task = task
			return TaskEnvelope(task, c.now()), nil
		}
		if task != nil {
			if err := sleep(ctx, poll); err != nil {
				return nil, fmt.Errorf("wait for turn %s on %s: %w", turn.TaskID, agentName, err)
			}
		}
		err = t.call(ctx, func(ctx context.Context, b binding) error {
			var err error
			task, err = b.getTask(ctx, turn.TaskID)
			return err
		})
		if err != nil {
			if IsPermanent(err) || ctx.Err() != nil {
				return nil, fmt.Errorf("get task %s on %s: %w", turn.TaskID, agentName, err)
			}
			task = nil
			if serr := sleep(ctx, poll); serr != nil {
				return nil, fmt.Errorf("wait for turn %s on %s: %w (last error: %v)", turn.TaskID, agentName, serr, err)
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
	Name       string    `json:"name"`
	URL        string    `json:"url"`
	Configured string    `json:"a2aVersion"`           // auto, 1.0 or 0.3
	Generation string    `json:"generation,omitempty"` // in use; "" until first contact
	Binding    string    `json:"binding,omitempty"`
	Endpoint   string    `json:"endpoint,omitempty"`
	ChosenBy   string    `json:"chosenBy,omitempty"` // config, card, or probe
	CardReadAt time.Time `json:"cardReadAt,omitzero"`
	CardError  string    `json:"cardError,omitempty"`
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
