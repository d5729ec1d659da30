package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// The conversation turn outbox, for operators:
//
//	GET  /v1/turns?state=&limit= → 200 {"turns":[…]}, oldest first
//	POST /v1/turns/{id}/retry    → 200 {"turn":{…}}; 404 unknown; 409 not dead
//	POST /v1/inbound/release/{id} → 200 {"inbound":{…}}: a message a flood
//	    limit held starts its turn now; 404 unknown; 409 not held

// Turns is what the API reads and does of the conversations' turn outbox.
// Unknown ids match store.ErrNotFound, a turn that is not dead
// store.ErrBadState.
type Turns interface {
	ListTurns(ctx context.Context, state string, limit int) ([]TurnItem, error)
	RetryTurn(ctx context.Context, id string) (*TurnItem, error)
}

// HeldReleaser releases a held inbound message: its turn starts now,
// whatever the flood limits (an operator's decision). TurnRoutes serves
// POST /v1/inbound/release/{id} when its Turns is one too. Unknown ids
// match store.ErrNotFound, a message that is not held store.ErrBadState.
type HeldReleaser interface {
	ReleaseInbound(ctx context.Context, id string) (*InboundItem, error)
}

// TurnItem is one turn: a message of a person sent to the agent.
type TurnItem struct {
	ID               string    `json:"id"`
	ConversationID   string    `json:"conversationId"`
	Agent            string    `json:"agent"`
	InboundID        string    `json:"inboundId"`
	MessageID        string    `json:"messageId"`
	State            string    `json:"state"`
	Attempts         int       `json:"attempts"`
	NextAttemptAt    time.Time `json:"nextAttemptAt,omitzero"`
	LastError        string    `json:"lastError,omitempty"`
	TaskID           string    `json:"taskId,omitempty"`
	AnswerEnvelopeID string    `json:"answerEnvelopeId,omitempty"`
	// AnsweredBy says how the agent's answer arrived: send (the answer to
	// SendMessage itself), push (an A2A push notification) or poll
	// (GetTask); set once the turn is answered.
	AnsweredBy string    `json:"answeredBy,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// turnStates are the states a turn can be in.
var turnStates = []string{"queued", "sending", "answered", "dead"}

// TurnRoutes serves the turn outbox endpoints.
func TurnRoutes(t Turns, log *slog.Logger) []Route {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	list := func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, err := listParams(q, []string{"state", "limit"}, nil)
		if err == nil && q.Get("state") != "" && !contains(turnStates, q.Get("state")) {
			err = &envelope.ValidationError{Problems: []envelope.Problem{{Path: "state",
				Reason: fmt.Sprintf("unknown state %q: one of %s", q.Get("state"), strings.Join(turnStates, ", "))}}}
		}
		if err != nil {
			WriteError(w, log, err)
			return
		}
		state := q.Get("state")
		ts, err := t.ListTurns(r.Context(), state, limit)
		if err != nil {
			WriteError(w, log, err)
			return
		}
		if ts == nil {
			ts = []TurnItem{}
		}
		WriteJSON(w, http.StatusOK, map[string]any{"turns": ts})
	}
	retry := func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !ValidID(id, "trn_") {
			WriteError(w, log, &envelope.ValidationError{Problems: []envelope.Problem{{Path: "id", Reason: "not a turn id (trn_…)"}}})
			return
		}
		it, err := t.RetryTurn(r.Context(), id)
		if err != nil {
			WriteError(w, log, err)
			return
		}
		WriteJSON(w, http.StatusOK, map[string]any{"turn": it})
	}
	routes := []Route{
		{Method: "GET", Pattern: "/v1/turns", Handler: http.HandlerFunc(list), Auth: true},
		{Method: "POST", Pattern: "/v1/turns/{id}/retry", Handler: http.HandlerFunc(retry), Auth: true},
	}
	if rel, ok := t.(HeldReleaser); ok {
		release := func(w http.ResponseWriter, r *http.Request) {
			id := r.PathValue("id")
			if !ValidID(id, "inb_") {
				WriteError(w, log, &envelope.ValidationError{Problems: []envelope.Problem{{Path: "id", Reason: "not an inbound message id (inb_…)"}}})
				return
			}
			it, err := rel.ReleaseInbound(r.Context(), id)
			if err != nil {
				WriteError(w, log, err)
				return
			}
			WriteJSON(w, http.StatusOK, map[string]any{"inbound": it})
		}
		routes = append(routes, Route{Method: "POST", Pattern: "/v1/inbound/release/{id}", Handler: http.HandlerFunc(release), Auth: true})
	}
	return routes
}
