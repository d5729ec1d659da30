package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
)

// Decider takes a normalised inbound decision (approvals.Service).
type Decider interface {
	HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error)
}

// Limits of an inbound decision.
const (
	MaxInboundBody   = 16 << 10
	maxReasonRunes   = 1000
	maxInboundIDLen  = 200
	maxDecidedByRune = 200
)

// Errors of inbound decisions.
var (
	// ErrBadDecision: the body is not a valid decision.
	ErrBadDecision = errors.New("invalid decision")
)

// Decision is the body of POST /v1/inbound/webhook/{endpoint}.
type Decision struct {
	ApprovalID string `json:"approvalId"`
	Token      string `json:"token"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	DecidedBy  string `json:"decidedBy,omitempty"`
}

// ParseDecision decodes and checks a decision body: strict JSON (no unknown
// fields, no trailing data), token required, decision one of granted /
// denied (approve, approved, deny, reject, rejected are accepted and
// normalised), bounded lengths, valid UTF-8.
func ParseDecision(b []byte) (Decision, error) {
	var d Decision
	if err := envelope.StrictUnmarshal(b, &d); err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrBadDecision, err)
	}
	var problems []string
	if d.Token == "" {
		problems = append(problems, "token is required")
	}
	for name, v := range map[string]string{"approvalId": d.ApprovalID, "token": d.Token} {
		if len(v) > maxInboundIDLen || strings.ContainsAny(v, " \t\r\n") {
			problems = append(problems, name+" is too long or has spaces")
		}
	}
	switch strings.ToLower(strings.TrimSpace(d.Decision)) {
	case "granted", "grant", "approve", "approved":
		d.Decision = envelope.DecisionGranted
	case "denied", "deny", "reject", "rejected":
		d.Decision = envelope.DecisionDenied
	default:
		problems = append(problems, `decision must be "granted" or "denied"`)
	}
	if !utf8.ValidString(d.Reason) || utf8.RuneCountInString(d.Reason) > maxReasonRunes {
		problems = append(problems, fmt.Sprintf("reason must be UTF-8 text of at most %d characters", maxReasonRunes))
	}
	if !utf8.ValidString(d.DecidedBy) || utf8.RuneCountInString(d.DecidedBy) > maxDecidedByRune {
		problems = append(problems, fmt.Sprintf("decidedBy must be UTF-8 text of at most %d characters", maxDecidedByRune))
	}
	if len(problems) > 0 {
		return Decision{}, fmt.Errorf("%w: %s", ErrBadDecision, strings.Join(problems, "; "))
	}
	d.Reason = strings.TrimSpace(d.Reason)
	return d, nil
}

// InboundHandler serves POST /v1/inbound/webhook/{endpoint}: a decision
// signed as Standard Webhooks with the endpoint's secret. The webhook-id
// becomes the inbound message id, so a replayed request has no second
// effect; the timestamp must be within Tolerance.
type InboundHandler struct {
	// Endpoints looks up an endpoint's verifying secrets.
	Endpoints interface {
		Endpoint(name string) (Endpoint, bool)
	}
	Decider   Decider
	Now       func() time.Time
	Tolerance time.Duration
	Log       *slog.Logger
}

// NewInboundHandler returns the handler for the Deliverer's endpoints.
func NewInboundHandler(d *Deliverer, dec Decider, now func() time.Time, log *slog.Logger) *InboundHandler {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &InboundHandler{Endpoints: d, Decider: dec, Now: now, Log: log}
}

// errVerifyFailed is the whole answer to an unknown endpoint or a request
// whose signature does not verify.
const errVerifyFailed = "signature verification failed (unknown endpoint, wrong secret, missing or stale webhook-* headers)"

type inboundAnswer struct {
	Outcome    string `json:"outcome,omitempty"`
	ApprovalID string `json:"approvalId,omitempty"`
	Decision   string `json:"decision,omitempty"`
	Error      string `json:"error,omitempty"`
}

func (h *InboundHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSON(w, http.StatusMethodNotAllowed, inboundAnswer{Error: "method not allowed"})
		return
	}
	name := r.PathValue("endpoint")
	if name == "" {
		name = r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	}
	ep, known := h.Endpoints.Endpoint(name)
	b, err := envelope.ReadLimited(r.Body, MaxInboundBody)
	if err != nil {
		var tl *envelope.TooLargeError
		if errors.As(err, &tl) {
			writeJSON(w, http.StatusRequestEntityTooLarge, inboundAnswer{Error: fmt.Sprintf("body larger than %d bytes", MaxInboundBody)})
			return
		}
		writeJSON(w, http.StatusBadRequest, inboundAnswer{Error: "could not read body"})
		return
	}
	now := h.Now()
	// An unknown endpoint is answered exactly as a known one whose
	// signature fails (same status, same body), so that endpoint names
	// cannot be found by probing; the reason goes to the log only.
	if !known {
		h.Log.Warn("inbound webhook decision refused", "endpoint", name, "reason", "unknown endpoint")
		writeJSON(w, http.StatusUnauthorized, inboundAnswer{Error: errVerifyFailed})
		return
	}
	if err := ep.Signer.Verify(r.Header, b, now, h.Tolerance); err != nil {
		h.Log.Warn("inbound webhook decision refused", "endpoint", name, "reason", err.Error())
		writeJSON(w, http.StatusUnauthorized, inboundAnswer{Error: errVerifyFailed})
		return
	}
	d, err := ParseDecision(b)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, inboundAnswer{Error: err.Error()})
		return
	}
	in := InboundFromDecision(name, r.Header.Get(HeaderID), d, now)
	res, err := h.Decider.HandleInbound(r.Context(), in)
	if err != nil {
		h.Log.Error("inbound webhook decision failed", "endpoint", name, "err", err)
		writeJSON(w, http.StatusInternalServerError, inboundAnswer{Error: "internal error; try again"})
		return
	}
	writeJSON(w, http.StatusOK, inboundAnswer{Outcome: res.Outcome, ApprovalID: res.ApprovalID, Decision: res.Decision})
}

// InboundFromDecision normalises a verified decision from endpoint into the
// inbound message approvals takes. From is the endpoint (the party the
// secret authenticates). The body's approvalId and decidedBy are not passed
// on: the token identifies the approval, and decidedBy comes from the
// token's binding (approvals/THREATS.md #16), never from what the sender
// claims.
func InboundFromDecision(endpoint, messageID string, d Decision, now time.Time) envelope.Inbound {
	return envelope.Inbound{
		Channel:     envelope.ChannelWebhook,
		From:        endpoint,
		MessageID:   "webhook:" + endpoint + ":" + messageID,
		Token:       d.Token,
		TokenSource: "webhook",
		Decision:    d.Decision,
		Reason:      d.Reason,
		ReceivedAt:  now,
		Evidence:    map[string]string{"webhookSignature": "valid"},
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
