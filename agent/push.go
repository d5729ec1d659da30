package agent

import (
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
// is stored per turn, a token survives restarts and is good for its turn
// only, and every replica sharing the secret can check it. The agent
// POSTs task updates there with the token in X-A2A-Notification-Token;
// the route takes no API key.
//
// Pushes serves that route: the token is checked in constant time before
// anything else (a wrong one is 401 whatever the turn), then the body is
// bounded and decoded (DecodeUpdate: every shape the SDKs post, 1.0 and
// 0.3). The updates of a turn that WaitTurn is waiting for in this process
// are folded into its task; once that task settles, WaitTurn returns it —
// the one place a turn's answer comes from, so it is delivered once
// whether a push or a poll saw it first. WaitTurn keeps polling, slowed by
// PushPollFactor, in case pushes stop. An update for a turn nobody waits
// for here (finished, unknown, or waited for by another replica, which
// polls) is answered 410 and ignored.

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

	mu    sync.Mutex
	turns map[string]*pushTurn
	added int
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
}

// register makes a new turn id that accepts pushes until release.
func (p *Pushes) register(agentName string) *pushTurn {
	now := time.Now()
	pt := &pushTurn{id: randomID(), agent: agentName, wake: make(chan struct{}, 1), added: now}
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
	return pt
}

// release stops accepting pushes for pt.
func (p *Pushes) release(pt *pushTurn) {
	p.mu.Lock()
	delete(p.turns, pt.id)
	p.mu.Unlock()
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

// apply folds u into pt's task. Called with p.mu held.
func (pt *pushTurn) apply(u *Update) {
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
		p.refuse(w, http.StatusGone, id, "turn "+id+" is not waiting for an answer here (finished, unknown, or waited for by another replica); update ignored")
		return
	}
	if u.TaskID != "" && pt.taskID != "" && u.TaskID != pt.taskID {
		p.mu.Unlock()
		p.refuse(w, http.StatusBadRequest, id, "task "+clip(u.TaskID)+" is not this turn's task "+clip(pt.taskID))
		return
	}
	if pt.taskID == "" {
		pt.taskID = u.TaskID
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
