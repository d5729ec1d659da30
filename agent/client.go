package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/cool-ai/beachd/envelope"
)

// Sentinel errors of the agent client.
var (
	// ErrUnknownAgent: no target of that name is configured.
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrPermanent marks an error that retrying cannot fix.
	ErrPermanent = errors.New("permanent agent error")
)

// Target is one agent's A2A JSON-RPC endpoint.
type Target struct {
	// URL is the JSON-RPC endpoint (http or https).
	URL string
	// Headers are added to every request (authorisation, for instance).
	Headers map[string]string
	// Timeout bounds one request; zero means 30s.
	Timeout time.Duration
}

// Client talks to the configured agents. It is safe for concurrent use.
type Client struct {
	targets map[string]*conn
	now     func() time.Time
}

type conn struct {
	transport a2aclient.Transport
	timeout   time.Duration
}

// New builds a client for targets. hc is the HTTP client to use (nil means
// a client with default settings); each target's headers are added by a
// wrapping RoundTripper, so hc is never modified.
func New(targets map[string]Target, hc *http.Client) (*Client, error) {
	if hc == nil {
		hc = &http.Client{}
	}
	c := &Client{targets: map[string]*conn{}, now: time.Now}
	names := make([]string, 0, len(targets))
	for n := range targets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t := targets[name]
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("agent %q: a2a_url %q must be an absolute http(s) URL", name, t.URL)
		}
		if t.Timeout <= 0 {
			t.Timeout = 30 * time.Second
		}
		thc := *hc
		if len(t.Headers) > 0 {
			base := hc.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			thc.Transport = headerTransport{base: base, headers: t.Headers}
		}
		c.targets[name] = &conn{transport: a2aclient.NewJSONRPCTransport(t.URL, &thc), timeout: t.Timeout}
	}
	return c, nil
}

// Has reports whether an agent of that name is configured.
func (c *Client) Has(name string) bool { _, ok := c.targets[name]; return ok }

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

func (c *Client) target(name string) (*conn, error) {
	t, ok := c.targets[name]
	if !ok {
		return nil, fmt.Errorf("agent %q: %w", name, errors.Join(ErrUnknownAgent, ErrPermanent))
	}
	return t, nil
}

// IsPermanent reports whether err is one that retrying the same request
// cannot fix.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrPermanent) || errors.Is(err, a2a.ErrTaskNotFound) ||
		errors.Is(err, a2a.ErrInvalidParams) || errors.Is(err, a2a.ErrInvalidRequest) ||
		errors.Is(err, a2a.ErrMethodNotFound) || errors.Is(err, a2a.ErrUnsupportedOperation)
}

// Inject sends resp into the suspended turn (session, turn) of agentName:
// message/send with contextId = session and taskId = turn, carrying one data
// part {approvalId, decision, reason, decidedBy, decidedAt} whose metadata
// says partType "approval-response". The request is non-blocking: the agent
// acknowledges receipt; the resumed turn runs on.
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
	msg := &a2a.Message{
		// A stable message id lets an agent recognise a repeated injection.
		ID:        "beachd-approval-" + resp.ApprovalID,
		Role:      a2a.MessageRoleUser,
		ContextID: session,
		TaskID:    a2a.TaskID(turn),
		Parts: a2a.ContentParts{a2a.DataPart{Data: data,
			Metadata: map[string]any{"partType": envelope.PartApprovalResponse}}},
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	blocking := false
	if _, err := t.transport.SendMessage(ctx, &a2a.MessageSendParams{
		Message: msg, Config: &a2a.MessageSendConfig{Blocking: &blocking},
	}); err != nil {
		return fmt.Errorf("inject approval-response into %s: %w", agentName, err)
	}
	return nil
}

// Turn is a turn started by StartTurn: either the agent answered at once
// with a Message, or it created a Task to poll.
type Turn struct {
	ContextID string
	TaskID    string
	Message   *a2a.Message // set when the agent replied with a message
	Task      *a2a.Task    // the latest task snapshot, when there is a task
}

// StartTurn sends text as a new user message (in contextID, when given) and
// returns what the agent answered. The request is non-blocking.
func (c *Client) StartTurn(ctx context.Context, agentName, text, contextID string) (*Turn, error) {
	t, err := c.target(agentName)
	if err != nil {
		return nil, err
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
	msg.ContextID = contextID
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	blocking := false
	res, err := t.transport.SendMessage(ctx, &a2a.MessageSendParams{
		Message: msg, Config: &a2a.MessageSendConfig{Blocking: &blocking},
	})
	if err != nil {
		return nil, fmt.Errorf("start turn on %s: %w", agentName, err)
	}
	switch r := res.(type) {
	case *a2a.Message:
		return &Turn{ContextID: r.ContextID, TaskID: string(r.TaskID), Message: r}, nil
	case *a2a.Task:
		return &Turn{ContextID: r.ContextID, TaskID: string(r.ID), Task: r}, nil
	}
	return nil, fmt.Errorf("start turn on %s: unexpected result %T", agentName, res)
}

// WaitTurn waits until turn settles — its task reaches a terminal state, or
// input-required / auth-required (the turn is suspended, typically on an
// approval) — polling tasks/get every poll (default 500ms) until ctx ends,
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
		if task != nil && settled(task.Status.State) {
			turn.Task = task
			return TaskEnvelope(task, c.now()), nil
		}
		if task != nil {
			timer := time.NewTimer(poll)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil, fmt.Errorf("wait for turn %s on %s: %w", turn.TaskID, agentName, ctx.Err())
			case <-timer.C:
			}
		}
		rctx, cancel := context.WithTimeout(ctx, t.timeout)
		task, err = t.transport.GetTask(rctx, &a2a.TaskQueryParams{ID: a2a.TaskID(turn.TaskID)})
		cancel()
		if err != nil {
			if IsPermanent(err) || ctx.Err() != nil {
				return nil, fmt.Errorf("get task %s on %s: %w", turn.TaskID, agentName, err)
			}
			task = nil
			timer := time.NewTimer(poll)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil, fmt.Errorf("wait for turn %s on %s: %w (last error: %v)", turn.TaskID, agentName, ctx.Err(), err)
			case <-timer.C:
			}
		}
	}
}

func settled(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// finalizedBy maps an A2A task state to the Beach turn state that settled it.
func finalizedBy(s a2a.TaskState) string {
	switch s {
	case a2a.TaskStateCompleted:
		return "complete"
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		return "suspended"
	}
	return "error"
}
