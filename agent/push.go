package agent

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A2A push notifications. When an agent's card says
// capabilities.pushNotifications, a turn beachd starts (SendMessage)
// carries a push configuration: the URL <public_url>/v1/a2a/push/{id},
// where id is beachd's own random id of the turn, and a token that is
// HMAC-SHA256 of the id under a key derived from beachd's secret. Nothing
// is stored per turn here, a token survives restarts and is good for its
// turn only, and every replica sharing the secret can check it. A turn
// left in flight by a process that stopped is resumed under the push id
// its record kept (ResumeTurn): same URL, same token, so the agent's
// later pushes answer it. The agent POSTs task updates there with the
// token in X-A2A-Notification-Token; the route takes no API key.
//
// Pushes serves that route: the token is checked in constant time before
// anything else (a wrong one is 401 whatever the turn), then the body is
// bounded and decoded (DecodeUpdate: every shape the SDKs post, 1.0 and
// 0.3). The updates of a turn that WaitTurn is waiting for in this process
// are folded into its task; once that task settles, WaitTurn returns it —
// the one place a turn's answer comes from, so it is delivered once
// whether a push or a poll saw it first. WaitTurn keeps polling, slowed by
// PushPollFactor, in case pushes stop.
//
// Replicas sharing a store (UseRelay) accept a push for a turn another
// replica waits for: the waiting replica records the turn when it starts
// it, the receiving one appends the push to that record and wakes the
// waiting one, which takes the record's pushes and folds them into its
// task as if they had arrived there (PushRelay). An update for a turn
// nobody waits for (finished or unknown) is answered 410 and ignored.

// PushPath is where push notifications arrive: PushPath + turn id.
const PushPath = "/v1/a2a/push/"

// PushTokenHeader carries a push notification's token.
const PushTokenHeader = "X-A2A-Notification-Token"

// PushPollFactor slows WaitTurn's polling of a turn whose answer is
// expected by push: polling is only the fallback.
const PushPollFactor = 10

// DefaultMaxPushBytes bounds a push notification's body.
const DefaultMaxPushBytes = 8 << 20

// maxPushID bounds a turn id read from a push URL.
const maxPushID = 128

// Answer channels: how WaitTurn learned a turn's answer.
const (
	AnsweredBySend = "send" // the agent's answer to SendMessage itself
	AnsweredByPush = "push"
	AnsweredByPoll = "poll"
)

// Pushes mints push configurations and receives push notifications. It is
// safe for concurrent use.
type Pushes struct {
	key      []byte
	base     string
	maxBytes int64
	log      *slog.Logger

	relay PushRelay

	mu    sync.Mutex
	turns map[string]*pushTurn
	added int
}

// PushRelay hands push notifications between the replicas that share a
// store: a push may reach any of them, and the answer is the waiting
// replica's to give. Each turn that asks for pushes has a record while a
// replica waits for it.
type PushRelay interface {
	// Open records that turn id waits for pushes, on this replica: a new
	// record, which replaces any the turn had (a turn resumed after a
	// restart passes to the replica that resumes it; the pushes its old
	// record held are older than the task the resumed turn reads first).
	Open(ctx context.Context, id string) error
	// Close removes turn id's record: later pushes for it are refused.
	Close(ctx context.Context, id string) error
	// Forward appends body, a push for turn id received by this replica,
	// to the turn's record and wakes the replica that waits for it
	// (PushWakeTopic). ok is false when no replica waits for turn id. When
	// the record's pushes would pass max bytes, body is dropped and the
	// record says so.
	Forward(ctx context.Context, id string, body []byte, max int64) (ok bool, err error)
	// Take removes and returns the pushes the record of turn id holds,
	// oldest first, and whether one was dropped.
	Take(ctx context.Context, id string) (bodies [][]byte, dropped bool, err error)
}

// PushWakeTopic is the store wake-up topic by which a replica that
// forwarded a push wakes the others: PushWakeTopic + " " + turn id.
const PushWakeTopic = "a2a-push"

// UseRelay makes p accept pushes for the turns other replicas wait for,
// and hand its own turns' pushes received elsewhere to their waiters
// (Relayed). Call it before the first turn.
func (p *Pushes) UseRelay(r PushRelay) { p.relay = r }

// Relayed tells p that pushes for turn id were forwarded to its record by
// another replica: the turn's waiter, if it is this replica, takes them.
func (p *Pushes) Relayed(id string) {
	p.mu.Lock()
	pt, ok := p.turns[id]
	if ok {
		pt.relayed = true
	}
	p.mu.Unlock()
	if ok {
		select {
		case pt.wake <- struct{}{}:
		default:
		}
	}
}

// relayTimeout bounds one call to the relay made outside a request.
const relayTimeout = 10 * time.Second

// takeRelayed folds into pt the pushes other replicas forwarded for it. A
// dropped push (the record was full) is a gap: the task is read once the
// pushes say it settled, and at once if they already do. It reports
// whether pt changed.
func (p *Pushes) takeRelayed(ctx context.Context, pt *pushTurn, always bool) bool {
	if p.relay == nil {
		return false
	}
	p.mu.Lock()
	due := pt.relayed || always
	pt.relayed = false
	p.mu.Unlock()
	if !due {
		return false
	}
	via := "wake"
	if always {
		via = "poll"
	}
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	bodies, dropped, err := p.relay.Take(ctx, pt.id)
	if err != nil {
		p.log.Warn("a2a push: take the pushes other replicas received", "turn", pt.id, "err", err)
		return false
	}
	if len(bodies) == 0 && !dropped {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range bodies {
		u, err := DecodeUpdate(b)
		if err != nil {
			// The forwarding replica decoded it; this one cannot.
			pt.gap = true
			continue
		}
		if reason := pt.accept(u); reason != "" {
			p.log.Info("a2a push refused", "turn", pt.id, "reason", reason, "relayed", via)
			continue
		}
		pt.apply(u)
		p.log.Debug("a2a push", "turn", pt.id, "agent", pt.agent, "kind", string(u.Kind), "generation", u.Generation,
			"state", string(pt.task.Status.State), "relayed", via)
	}
	if dropped {
		pt.gap = true
	}
	return true
}

// pushTurnMaxAge is how long a turn that nobody released (its WaitTurn
// never ran) keeps accepting pushes.
const pushTurnMaxAge = 48 * time.Hour

// NewPushes derives the tokens' key from secret (beachd's secret; the
// derivation keeps this use apart from others) and roots the push URLs at
// publicURL. A nil log discards.
func NewPushes(secret []byte, publicURL string, log *slog.Logger) *Pushes {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("beachd a2a push tokens v1"))
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pushes{key: m.Sum(nil), base: strings.TrimRight(publicURL, "/"), maxBytes: DefaultMaxPushBytes,
		log: log, turns: map[string]*pushTurn{}}
}

// Token is the push token of turn id.
func (p *Pushes) Token(id string) string {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// URL is the push URL of turn id.
func (p *Pushes) URL(id string) string { return p.base + PushPath + id }

// pushTurn is a turn WaitTurn waits for, and what its pushes said.
type pushTurn struct {
	id    string
	agent string
	wake  chan struct{} // capacity 1: "something changed"
	added time.Time

	// Under Pushes.mu.
	taskID   string
	task     *Task
	snapshot bool // task started from a whole task, not from parts of one
	gap      bool // an update could not be applied: ask the agent
	pushes   int
	relayed  bool // another replica forwarded pushes for this turn
}

// register makes a new turn id that accepts pushes until release: on
// every replica, when p relays.
func (p *Pushes) register(ctx context.Context, agentName string) *pushTurn {
	return p.registerID(ctx, agentName, randomID())
}

// ValidPushID reports whether id can be a turn's push id: what randomID
// makes, as a run's record keeps it across a restart.
func ValidPushID(id string) bool {
	h, ok := strings.CutPrefix(id, "beachd-")
	if !ok || len(h) != 32 {
		return false
	}
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// registerID makes turn id accept pushes until release: a new turn, or
// one a previous process started and recorded (ResumeTurn), whose relay
// record passes to this replica.
func (p *Pushes) registerID(ctx context.Context, agentName, id string) *pushTurn {
	now := time.Now()
	pt := &pushTurn{id: id, agent: agentName, wake: make(chan struct{}, 1), added: now}
	p.mu.Lock()
	p.turns[pt.id] = pt
	if p.added++; p.added%256 == 0 {
		for id, t := range p.turns {
			if now.Sub(t.added) > pushTurnMaxAge {
				delete(p.turns, id)
			}
		}
	}
	p.mu.Unlock()
	if p.relay != nil {
		if err := p.relay.Open(ctx, pt.id); err != nil {
			// Pushes that reach another replica are refused; this one
			// takes its own, and polls.
			p.log.Warn("a2a push: record the turn for the other replicas", "turn", pt.id, "err", err)
		}
	}
	return pt
}

// release stops accepting pushes for pt.
func (p *Pushes) release(pt *pushTurn) {
	p.mu.Lock()
	delete(p.turns, pt.id)
	p.mu.Unlock()
	if p.relay != nil {
		ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
		defer cancel()
		if err := p.relay.Close(ctx, pt.id); err != nil {
			p.log.Warn("a2a push: remove the turn's record", "turn", pt.id, "err", err)
		}
	}
}

// setTask records the agent's task id (from SendMessage's answer); pushes
// for another task are refused.
func (p *Pushes) setTask(pt *pushTurn, taskID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pt.taskID == "" {
		pt.taskID = taskID
	}
}

// seed makes task, as beachd read it from the agent, the base the turn's
// later pushes build on, when no push arrived yet: a turn resumed after a
// restart missed the whole task its first pushes carried, and an agent may
// push only changes.
func (p *Pushes) seed(pt *pushTurn, task *Task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pt.task != nil || task == nil || (pt.taskID != "" && task.ID != "" && task.ID != pt.taskID) {
		return
	}
	pt.task, pt.snapshot = cloneTask(task), true
	if pt.taskID == "" {
		pt.taskID = task.ID
	}
}

// settled returns the turn's task as the pushes built it, when it has
// settled and nothing was missed.
func (p *Pushes) settled(pt *pushTurn) (*Task, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pt.task == nil || !pt.task.Status.State.Settled() || !pt.snapshot || pt.gap {
		return nil, false
	}
	return cloneTask(pt.task), true
}

// needsPoll reports whether pushes said the turn settled but beachd missed
// part of what led there: the task must be read.
func (p *Pushes) needsPoll(pt *pushTurn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pt.task != nil && pt.task.Status.State.Settled() && (!pt.snapshot || pt.gap)
}

func cloneTask(t *Task) *Task {
	c := *t
	c.Artifacts = slices.Clone(t.Artifacts)
	for i := range c.Artifacts {
		c.Artifacts[i].Parts = slices.Clone(c.Artifacts[i].Parts)
	}
	c.History = slices.Clone(t.History)
	return &c
}

// accept returns why u cannot be this turn's (another task), or "".
// Called with p.mu held.
func (pt *pushTurn) accept(u *Update) string {
	if u.TaskID != "" && pt.taskID != "" && u.TaskID != pt.taskID {
		return "task " + clip(u.TaskID) + " is not this turn's task " + clip(pt.taskID)
	}
	return ""
}

// apply folds u into pt's task. Once the pushes gave a whole settled
// task, an update that would unsettle it is one that left the agent
// before (pushes reach several replicas, and are relayed, in no set
// order): it is ignored. Called with p.mu held.
func (pt *pushTurn) apply(u *Update) {
	if pt.taskID == "" {
		pt.taskID = u.TaskID
	}
	if pt.task != nil && pt.task.Status.State.Settled() && pt.snapshot && !pt.gap {
		switch {
		case u.Kind == UpdateTask && !u.Task.Status.State.Settled(),
			u.Kind == UpdateStatus && !u.Status.State.Settled():
			return
		}
	}
	pt.pushes++
	if pt.task == nil {
		pt.task = &Task{ID: u.TaskID, ContextID: u.ContextID, Status: TaskStatus{State: StateSubmitted}}
	}
	t := pt.task
	switch u.Kind {
	case UpdateTask:
		pt.task, pt.snapshot, pt.gap = cloneTask(u.Task), true, false
	case UpdateStatus:
		t.Status = *u.Status
	case UpdateArtifact:
		i := slices.IndexFunc(t.Artifacts, func(a Artifact) bool { return a.ArtifactID == u.Artifact.ArtifactID })
		switch {
		case i >= 0 && u.Append:
			t.Artifacts[i].Parts = append(t.Artifacts[i].Parts, u.Artifact.Parts...)
		case i >= 0:
			t.Artifacts[i] = *u.Artifact
		case u.Append:
			// The start of this artifact was missed.
			pt.gap = true
		default:
			if len(t.Artifacts) >= maxList {
				pt.gap = true
				return
			}
			t.Artifacts = append(t.Artifacts, *u.Artifact)
		}
	case UpdateMessage:
		if len(t.History) >= maxList {
			t.History = t.History[1:]
		}
		t.History = append(t.History, *u.Message)
	}
}

// pushError is the body of a refused push.
type pushError struct {
	Error string `json:"error"`
}

func (p *Pushes) refuse(w http.ResponseWriter, status int, id, reason string) {
	p.log.Info("a2a push refused", "turn", clip(id), "status", status, "reason", reason)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(pushError{Error: reason})
}

// ServeHTTP receives one push notification: POST PushPath{id}.
func (p *Pushes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, PushPath)
	got := r.Header.Get(PushTokenHeader)
	if got == "" {
		if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = a
		}
	}
	// The token first, in constant time: nothing about the turn is told
	// to whoever does not hold it.
	if len(id) > maxPushID || !hmac.Equal([]byte(got), []byte(p.Token(id))) {
		p.refuse(w, http.StatusUnauthorized, "", "push token missing or wrong for this turn")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		p.refuse(w, http.StatusMethodNotAllowed, id, "push notifications are POSTed")
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.maxBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			p.refuse(w, http.StatusRequestEntityTooLarge, id, "push notification larger than "+strconv.FormatInt(p.maxBytes, 10)+" bytes")
			return
		}
		p.refuse(w, http.StatusBadRequest, id, "read push notification: "+err.Error())
		return
	}
	u, err := DecodeUpdate(b)
	if err != nil {
		p.refuse(w, http.StatusBadRequest, id, err.Error())
		return
	}
	p.mu.Lock()
	pt, ok := p.turns[id]
	if !ok {
		p.mu.Unlock()
		p.forward(w, r, id, b, u)
		return
	}
	if reason := pt.accept(u); reason != "" {
		p.mu.Unlock()
		p.refuse(w, http.StatusBadRequest, id, reason)
		return
	}
	pt.apply(u)
	state := pt.task.Status.State
	p.mu.Unlock()
	select {
	case pt.wake <- struct{}{}:
	default:
	}
	p.log.Debug("a2a push", "turn", id, "agent", pt.agent, "kind", string(u.Kind), "generation", u.Generation, "state", string(state))
	w.WriteHeader(http.StatusNoContent)
}

// forward hands a push for a turn this replica does not wait for to the
// replica that does, through the relay.
func (p *Pushes) forward(w http.ResponseWriter, r *http.Request, id string, b []byte, u *Update) {
	if p.relay == nil {
		p.refuse(w, http.StatusGone, id, "turn "+id+" is not waiting for an answer (finished or unknown); update ignored")
		return
	}
	ok, err := p.relay.Forward(r.Context(), id, b, p.maxBytes)
	if err != nil {
		p.log.Warn("a2a push: forward to the waiting replica", "turn", id, "err", err)
		p.refuse(w, http.StatusServiceUnavailable, id, "the push could not be recorded; send it again")
		return
	}
	if !ok {
		p.refuse(w, http.StatusGone, id, "turn "+id+" is not waiting for an answer (finished or unknown); update ignored")
		return
	}
	p.log.Debug("a2a push forwarded", "turn", id, "kind", string(u.Kind), "generation", u.Generation)
	w.WriteHeader(http.StatusNoContent)
}
