package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// ApprovalService is what the operator endpoints need of the approvals
// package (approvals.Service implements it).
type ApprovalService interface {
	List(ctx context.Context, state, after string, limit int) ([]*approvals.View, error)
	ListByInjection(ctx context.Context, state string, limit int) ([]*approvals.View, error)
	Get(ctx context.Context, id string) (*approvals.View, error)
	Decide(ctx context.Context, id, decision, reason, keyID string) (*approvals.View, error)
	RetryInjection(ctx context.Context, id string) (*store.Injection, error)
	Trail(ctx context.Context, id string) (*approvals.Trail, error)
}

var _ ApprovalService = (*approvals.Service)(nil)

// ApprovalRoutes are the operator endpoints: GET /v1/approvals?state=…
// (or ?injection=pending|done|dead: approvals by the state of their
// injection, dead being the dead letters),
// GET /v1/approvals/{approvalId}, POST /v1/approvals/{approvalId}/decision
// {"decision":"granted|denied|void","reason"} and POST
// /v1/approvals/{approvalId}/retry-injection, and GET
// /v1/approvals/{approvalId}/events (the hash-chained event trail, verified
// by the server: EventsView). All need the API key; an
// operator decision's decidedBy is "operator:<key id>", the key id being
// the first 8 hex digits of the key's SHA-256.
func ApprovalRoutes(svc ApprovalService, log *slog.Logger) []Route {
	h := approvalHandlers{svc: svc, log: log}
	return []Route{
		{Method: "GET", Pattern: "/v1/approvals", Handler: http.HandlerFunc(h.list), Auth: true},
		{Method: "GET", Pattern: "/v1/approvals/{approvalId}", Handler: http.HandlerFunc(h.get), Auth: true},
		{Method: "POST", Pattern: "/v1/approvals/{approvalId}/decision", Handler: http.HandlerFunc(h.decide), Auth: true},
		{Method: "POST", Pattern: "/v1/approvals/{approvalId}/retry-injection", Handler: http.HandlerFunc(h.retry), Auth: true},
		{Method: "GET", Pattern: "/v1/approvals/{approvalId}/events", Handler: http.HandlerFunc(h.events), Auth: true},
	}
}

type approvalHandlers struct {
	svc ApprovalService
	log *slog.Logger
}

// approvalError maps approvals' errors onto the ones WriteError knows.
func approvalError(err error) error {
	switch {
	case errors.Is(err, approvals.ErrBadDecision):
		return &envelope.ValidationError{Problems: []envelope.Problem{{Path: "decision", Reason: err.Error()}}}
	case errors.Is(err, approvals.ErrBadState):
		return &envelope.ValidationError{Problems: []envelope.Problem{{Path: "state", Reason: err.Error()}}}
	case errors.Is(err, store.ErrAlreadyDecided):
		return fmt.Errorf("%w: the approval was already decided", store.ErrBadState)
	}
	return err
}

func (h approvalHandlers) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			WriteError(w, h.log, &envelope.ValidationError{Problems: []envelope.Problem{{Path: "limit", Reason: "must be an integer from 1 to 1000"}}})
			return
		}
		limit = n
	}
	var vs []*approvals.View
	var err error
	if inj := q.Get("injection"); inj != "" {
		vs, err = h.svc.ListByInjection(r.Context(), inj, limit)
	} else {
		vs, err = h.svc.List(r.Context(), q.Get("state"), q.Get("after"), limit)
	}
	if err != nil {
		WriteError(w, h.log, approvalError(err))
		return
	}
	out := map[string]any{"approvals": approvalViews(vs)}
	if len(vs) == limit {
		out["next"] = vs[len(vs)-1].ID
	}
	WriteJSON(w, http.StatusOK, out)
}

func (h approvalHandlers) get(w http.ResponseWriter, r *http.Request) {
	v, err := h.svc.Get(r.Context(), r.PathValue("approvalId"))
	if err != nil {
		WriteError(w, h.log, approvalError(err))
		return
	}
	WriteJSON(w, http.StatusOK, approvalView(v))
}

func (h approvalHandlers) events(w http.ResponseWriter, r *http.Request) {
	t, err := h.svc.Trail(r.Context(), r.PathValue("approvalId"))
	if err != nil {
		WriteError(w, h.log, approvalError(err))
		return
	}
	WriteJSON(w, http.StatusOK, eventsView(t))
}

// DecisionRequest is the body of POST /v1/approvals/{approvalId}/decision.
type DecisionRequest struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

func (h approvalHandlers) decide(w http.ResponseWriter, r *http.Request) {
	body, err := envelope.ReadLimited(r.Body, 64<<10)
	if err != nil {
		WriteError(w, h.log, err)
		return
	}
	var req DecisionRequest
	if err := envelope.StrictUnmarshal(body, &req); err != nil {
		WriteError(w, h.log, &envelope.ValidationError{Problems: []envelope.Problem{{Reason: err.Error()}}})
		return
	}
	if len(req.Reason) > 500 {
		WriteError(w, h.log, &envelope.ValidationError{Problems: []envelope.Problem{{Path: "reason", Reason: "longer than 500 characters"}}})
		return
	}
	v, err := h.svc.Decide(r.Context(), r.PathValue("approvalId"), req.Decision, req.Reason, KeyID(r))
	if err != nil {
		WriteError(w, h.log, approvalError(err))
		return
	}
	WriteJSON(w, http.StatusOK, approvalView(v))
}

func (h approvalHandlers) retry(w http.ResponseWriter, r *http.Request) {
	inj, err := h.svc.RetryInjection(r.Context(), r.PathValue("approvalId"))
	if err != nil {
		WriteError(w, h.log, approvalError(err))
		return
	}
	WriteJSON(w, http.StatusOK, injectionView(inj))
}

// KeyID names the bearer key of r without revealing it: the first 8 hex
// digits of its SHA-256.
func KeyID(r *http.Request) string {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return hex.EncodeToString(sum[:4])
}
