package approvals

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"crypto/rand"

	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/outbox"
	"github.com/cool-ai/beachd/store"
)

// Sender delivers one approval-response into an agent's suspended turn.
// agent.Client (A2A) implements it; WebhookSender is the alternative.
type Sender interface {
	Inject(ctx context.Context, agentName, session, turn string, resp envelope.ApprovalResponse) error
}

// Confirmer is a Sender that can tell whether the agent already holds a
// decision (agent.Client does, from the task's history). The injector
// asks before it dead-letters a retried injection: when an attempt's
// answer was lost after the agent took the decision and completed the
// task, the retry is refused ("task in a terminal state"), yet the
// decision was delivered.
type Confirmer interface {
	HasDecision(ctx context.Context, agentName, session, turn string, resp envelope.ApprovalResponse) (bool, error)
}

// InjectorConfig tunes the injection worker. Zero values mean the defaults.
type InjectorConfig struct {
	// Lifetime after the decision past which a failing injection is
	// dead-lettered; default 24h.
	Lifetime time.Duration
	// MinBackoff and MaxBackoff bound the exponential backoff (with jitter)
	// between attempts; defaults 1s and 5m.
	MinBackoff, MaxBackoff time.Duration
	// Workers is the number of concurrent injections; default 8.
	Workers int
	// Lease is how long a claimed job is held before another claim may take
	// it (a crashed worker); default 2m. It must exceed the sender's timeout.
	Lease time.Duration
	// Permanent classifies errors that retrying cannot fix (they are
	// dead-lettered at once). Default: none is.
	Permanent func(error) bool
	Now       func() time.Time
	Rand      io.Reader
	// Metrics, when set, count attempts and time decisions to injection.
	Metrics *Metrics
	// Shared says other processes use the store too (store.Store.Shared):
	// their claims are live, and only those whose lease ran out are
	// requeued.
	Shared bool
}

// Injector is the worker that delivers queued decisions to agents: at least
// once, with retries and backoff, dead-lettering (visibly, in the store and
// the audit trail) what keeps failing. It never drops a decision.
type Injector struct {
	cfg     InjectorConfig
	db      store.Injections
	senders func(agent string) Sender
	log     *slog.Logger
	wake    chan struct{}
	handoff chan *store.Injection
	started time.Time // jobs leased before this belong to a previous process

	mu       sync.Mutex
	watchers map[string][]chan string // injection id → who waits for its next outcome
}

// NewInjector builds the worker. senders returns the Sender of an agent
// (nil when none: the job is retried, then dead-lettered).
func NewInjector(cfg InjectorConfig, db store.Injections, senders func(agent string) Sender, log *slog.Logger) *Injector {
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 24 * time.Hour
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 2 * time.Minute
	}
	if cfg.Permanent == nil {
		cfg.Permanent = func(error) bool { return false }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Injector{cfg: cfg, db: db, senders: senders, log: log, wake: make(chan struct{}, 1),
		handoff: make(chan *store.Injection, 4*cfg.Workers), started: cfg.Now()}
}

// Lease is how long a claimed job is held; a job handed over with Submit
// must have been claimed for this long (store.Decision.ClaimFor).
func (j *Injector) Lease() time.Duration { return j.cfg.Lease }

// Submit hands a job that its caller already claimed (in the decision's
// own transaction) straight to a worker, saving a claim transaction on the
// way from decision to agent. It never blocks: false means the hand-over
// queue is full and the caller must release the job (store.ReleaseInjection).
func (j *Injector) Submit(inj *store.Injection) bool {
	select {
	case j.handoff <- inj:
		return true
	default:
		return false
	}
}

// Watch returns a channel that receives the state of the next attempt
// recorded for injection id (store.InjectionDone, store.InjectionDead, or
// store.InjectionPending for a failed attempt that will be retried), and a
// function to stop watching. Register before the job can run.
func (j *Injector) Watch(id string) (<-chan string, func()) {
	ch := make(chan string, 1)
	j.mu.Lock()
	if j.watchers == nil {
		j.watchers = map[string][]chan string{}
	}
	j.watchers[id] = append(j.watchers[id], ch)
	j.mu.Unlock()
	return ch, func() {
		j.mu.Lock()
		defer j.mu.Unlock()
		ws := j.watchers[id]
		for i, w := range ws {
			if w == ch {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(j.watchers, id)
		} else {
			j.watchers[id] = ws
		}
	}
}

func (j *Injector) notify(id, state string) {
	j.mu.Lock()
	ws := j.watchers[id]
	delete(j.watchers, id)
	j.mu.Unlock()
	for _, w := range ws {
		w <- state // buffered, one send per registration
	}
}

// Wake makes Run look for due jobs now. It never blocks.
func (j *Injector) Wake() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Run delivers due injections until ctx ends. Alone on its store, it first
// makes due at once every job a previous process held when it stopped; on
// a shared store, where other replicas' claims are live, it makes due the
// jobs whose lease ran out, at start and every 10 s.
func (j *Injector) Run(ctx context.Context) error {
	var requeue func(context.Context)
	if j.cfg.Shared {
		requeue = j.requeueExpired
	} else if n, err := j.db.RequeueClaimedInjections(ctx, j.started, j.cfg.Now()); err != nil {
		return err
	} else if n > 0 {
		j.log.Info("approval injections requeued after restart", "count", n)
	}
	return outbox.Loop[*store.Injection]{
		Requeue: requeue,
		Workers: j.cfg.Workers,
		Claim: func(ctx context.Context, n int) ([]*store.Injection, error) {
			return j.db.ClaimInjections(ctx, j.cfg.Now(), n, j.cfg.Lease)
		},
		Attempt:     j.attempt,
		Next:        j.db.NextInjection,
		Now:         j.cfg.Now,
		Wake:        j.wake,
		Poke:        j.Wake,
		Handoff:     j.handoff,
		ClaimFailed: func(err error) { j.log.Error("claim injections", "err", err) },
	}.Run(ctx)
}

// requeueExpired makes due the jobs whose lease ran out (a replica that
// died held them): RequeueClaimedInjections takes the jobs claimed
// (UpdatedAt) before its bound, here more than a lease ago.
func (j *Injector) requeueExpired(ctx context.Context) {
	now := j.cfg.Now()
	n, err := j.db.RequeueClaimedInjections(ctx, now.Add(-j.cfg.Lease), now)
	switch {
	case err != nil && ctx.Err() == nil:
		j.log.Error("requeue approval injections whose lease ran out", "err", err)
	case n > 0:
		j.log.Warn("approval injections whose lease ran out requeued", "count", n)
	}
}

func (j *Injector) attempt(ctx context.Context, inj *store.Injection) {
	if inj.Session == store.MCPSession {
		j.keepForMCP(ctx, inj)
		return
	}
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("injector panicked: %v", p)
			}
		}()
		snd := j.senders(inj.Agent)
		if snd == nil {
			err = fmt.Errorf("no injector configured for agent %q", inj.Agent)
			return
		}
		err = snd.Inject(ctx, inj.Agent, inj.Session, inj.Turn, inj.Response)
	}()
	if ctx.Err() != nil && err != nil {
		return // shutting down: the lease runs out and the job is taken again
	}
	now := j.cfg.Now()
	o := store.InjectionOutcome{State: store.InjectionDone, At: now}
	confirmed := false
	if err != nil {
		o.Error = err.Error()
		switch {
		case j.cfg.Permanent(err):
			o.State = store.InjectionDead
			o.Error = "permanent: " + o.Error
		case now.Sub(inj.CreatedAt) >= j.cfg.Lifetime:
			o.State = store.InjectionDead
			o.Error = "gave up after " + j.cfg.Lifetime.String() + ": " + o.Error
		default:
			o.State = store.InjectionPending
			o.NextAt = now.Add(j.backoff(inj.Attempts))
		}
		if o.State == store.InjectionDead && inj.Attempts > 1 {
			if j.agentHasIt(ctx, inj, err) {
				o, confirmed = store.InjectionOutcome{State: store.InjectionDone, At: now}, true
			} else if ctx.Err() != nil {
				return // shutting down while asking: the job is taken again
			}
		}
	}
	if _, rerr := j.db.RecordInjection(context.WithoutCancel(ctx), inj, o); rerr != nil {
		if !errors.Is(rerr, store.ErrLeaseLost) {
			j.log.Error("record injection", "approval_id", inj.ApprovalID, "err", rerr)
		}
		return
	}
	j.notify(inj.ID, o.State)
	j.cfg.Metrics.observeInjection(map[string]string{store.InjectionDone: "done", store.InjectionDead: "dead",
		store.InjectionPending: "retry"}[o.State], inj.Response.DecidedAt, now)
	switch {
	case o.State == store.InjectionDone && confirmed:
		j.log.Info("approval injected (the agent already had it: an earlier attempt's answer was lost)",
			"approval_id", inj.ApprovalID, "agent", inj.Agent, "attempt", inj.Attempts, "refusal", err)
	case o.State == store.InjectionDone:
		j.log.Info("approval injected", "approval_id", inj.ApprovalID, "agent", inj.Agent, "attempt", inj.Attempts)
	case o.State == store.InjectionDead:
		j.log.Error("approval injection dead-lettered", "approval_id", inj.ApprovalID, "agent", inj.Agent, "attempt", inj.Attempts, "err", o.Error)
	default:
		j.log.Warn("approval injection failed; will retry", "approval_id", inj.ApprovalID, "agent", inj.Agent, "attempt", inj.Attempts, "next", o.NextAt, "err", o.Error)
	}
}

// keepForMCP records the job of an approval asked through MCP done
// without calling anybody: no suspended turn waits for its decision, which
// the MCP caller reads with get_approval. The store's trail says so (event
// returned, actor mcp), and the metrics count it as returned, not done.
func (j *Injector) keepForMCP(ctx context.Context, inj *store.Injection) {
	now := j.cfg.Now()
	o := store.InjectionOutcome{State: store.InjectionDone, At: now}
	if _, err := j.db.RecordInjection(context.WithoutCancel(ctx), inj, o); err != nil {
		if !errors.Is(err, store.ErrLeaseLost) {
			j.log.Error("record injection", "approval_id", inj.ApprovalID, "err", err)
		}
		return
	}
	j.notify(inj.ID, o.State)
	j.cfg.Metrics.observeInjection("returned", inj.Response.DecidedAt, now)
	j.log.Info("approval decision kept for its MCP caller (get_approval); no agent is called",
		"approval_id", inj.ApprovalID, "agent", inj.Agent, "decision", inj.Response.Decision)
}

// agentHasIt asks the agent, when its Sender can tell (Confirmer),
// whether it already holds the decision that attempt failed to inject.
// It is asked only of a retry about to be dead-lettered: an earlier
// attempt may have reached the agent with its answer lost, and the agent
// then refuses the repeat (its task is finished). A first attempt never
// reached the agent before, so its refusal stands. Only the agent's own
// record — our message, or a data part with this approvalId, in the
// task's history — counts; an error asking counts as no.
func (j *Injector) agentHasIt(ctx context.Context, inj *store.Injection, cause error) (had bool) {
	defer func() {
		if p := recover(); p != nil {
			j.log.Error("asking the agent whether it already has the decision panicked", "approval_id", inj.ApprovalID, "panic", fmt.Sprint(p))
			had = false
		}
	}()
	cf, ok := j.senders(inj.Agent).(Confirmer)
	if !ok {
		return false
	}
	had, err := cf.HasDecision(ctx, inj.Agent, inj.Session, inj.Turn, inj.Response)
	if err != nil {
		j.log.Warn("could not ask the agent whether it already has the decision", "approval_id", inj.ApprovalID,
			"agent", inj.Agent, "attempt", inj.Attempts, "refusal", cause, "err", err)
		return false
	}
	return had
}

// backoff is MinBackoff·2^(attempt-1), capped at MaxBackoff, with ±20% jitter.
func (j *Injector) backoff(attempt int) time.Duration {
	d := j.cfg.MinBackoff
	for i := 1; i < attempt && d < j.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, j.cfg.MaxBackoff)
	var b [8]byte
	if _, err := io.ReadFull(j.cfg.Rand, b[:]); err == nil {
		f := float64(binary.BigEndian.Uint64(b[:])>>11)/float64(1<<53)*0.4 - 0.2
		d += time.Duration(float64(d) * f)
	}
	return d
}

// signer signs a Standard Webhooks message (channels/webhook.Signer).
type signer interface {
	Sign(id string, ts time.Time, body []byte) string
}

// WebhookSender injects decisions as Standard-Webhooks-signed POSTs, for
// agents configured with `injector: webhook`. The body is
// {"type":"beach.approval-response","timestamp":…,"data":{"agent","session",
// "turn","part":{"data":{…},"metadata":{"partType":"approval-response"}}}};
// webhook-id is stable per approval, so a repeated delivery is recognisable.
//
// The decision and the configured headers go to URL and nowhere else: a
// redirect is never followed — it is a permanent *HTTPStatusError, "agent
// answered a redirect to <origin> (not followed)" — whatever Client does
// with redirects; and with no Client, the one used dials URL's host:port
// or public addresses only (fetch.EndpointClient).
type WebhookSender struct {
	URL     string
	Signer  signer
	Headers map[string]string
	// Client, when set, sends the requests (its redirect policy is
	// replaced by none); nil means fetch.EndpointClient(URL, 30s).
	Client *http.Client
	Now    func() time.Time

	once sync.Once
	hc   *http.Client
	err  error
}

// HTTPStatusError is a non-2xx answer of a webhook injector target.
type HTTPStatusError struct {
	Status int
	// To is, for a 3xx, the origin its Location names (fetch.RedirectTarget).
	To string
}

func (e *HTTPStatusError) Error() string {
	if fetch.IsRedirect(e.Status) {
		return fmt.Sprintf("agent answered a redirect to %s (not followed): HTTP %d from the approval webhook; set webhook_url to the endpoint it serves",
			e.To, e.Status)
	}
	return fmt.Sprintf("webhook answered HTTP %d", e.Status)
}

// Permanent: a redirect (the same URL answers the same until the
// configuration changes), and 4xx other than 408, 409 and 429, will not
// change on retry.
func (e *HTTPStatusError) Permanent() bool {
	return fetch.IsRedirect(e.Status) ||
		e.Status >= 400 && e.Status < 500 && e.Status != 408 && e.Status != 409 && e.Status != 429
}

func (w *WebhookSender) client() (*http.Client, error) {
	w.once.Do(func() {
		if w.Client == nil {
			w.hc, w.err = fetch.EndpointClient(w.URL, 30*time.Second)
			return
		}
		hc := *w.Client
		hc.CheckRedirect = fetch.NoRedirects
		w.hc = &hc
	})
	return w.hc, w.err
}

// Inject implements Sender.
func (w *WebhookSender) Inject(ctx context.Context, agentName, session, turn string, resp envelope.ApprovalResponse) error {
	hc, err := w.client()
	if err != nil {
		return fmt.Errorf("approval webhook: %w", err)
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	ts := now()
	data, _ := json.Marshal(resp)
	body, err := json.Marshal(map[string]any{
		"type": "beach.approval-response", "timestamp": ts.UTC().Format(time.RFC3339),
		"data": map[string]any{"agent": agentName, "session": session, "turn": turn,
			"part": map[string]any{"data": json.RawMessage(data), "metadata": map[string]any{"partType": envelope.PartApprovalResponse}}},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	id := "msg_approval_" + resp.ApprovalID
	req.Header.Set("Content-Type", "application/json")
	for k, v := range w.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
	if w.Signer != nil {
		req.Header.Set("webhook-signature", w.Signer.Sign(id, ts, body))
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("post approval-response: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if fetch.IsRedirect(res.StatusCode) {
		return &HTTPStatusError{Status: res.StatusCode, To: fetch.RedirectTarget(res)}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return &HTTPStatusError{Status: res.StatusCode}
	}
	return nil
}

// PermanentHTTP reports whether err is a webhook answer that retrying cannot
// change; combine it with agent.IsPermanent in InjectorConfig.Permanent.
func PermanentHTTP(err error) bool {
	var he *HTTPStatusError
	return errors.As(err, &he) && he.Permanent()
}
