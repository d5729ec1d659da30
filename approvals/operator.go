package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cool-ai/beachd/store"
)

// View is an approval as operators see it: no nonces.
type View struct {
	store.Approval
	Summary   string             `json:"summary"`
	Audit     []store.AuditEntry `json:"audit,omitempty"`
	Injection *store.Injection   `json:"injection,omitempty"`
	// Why is the reason the agent gave for asking, AgentMessage the text
	// it sent with the request, ToolTitle the tool's title: what the
	// approval page shows. Get fills them in for the console; the API
	// does not carry them.
	Why          string `json:"-"`
	AgentMessage string `json:"-"`
	ToolTitle    string `json:"-"`
	// Trail is the hash-chained event trail, verified (Get only).
	Trail *Trail `json:"-"`
	// Timers are a pending approval's next reminders and escalations
	// under its policy, by due (Get only).
	Timers []store.ApprovalTimer `json:"timers,omitempty"`
}

func view(a *store.Approval) *View {
	v := &View{Approval: *a, Summary: Summary(a)}
	v.Recipients = nil
	for _, r := range a.Recipients {
		v.Recipients = append(v.Recipients, store.ApprovalRecipient{Channel: r.Channel, Address: r.Address, Person: r.Person, Step: r.Step})
	}
	return v
}

// List lists approvals, optionally in one state (pending, granted, denied,
// expired, void).
func (s *Service) List(ctx context.Context, state, after string, limit int) ([]*View, error) {
	switch state {
	case "", store.ApprovalPending, store.ApprovalGranted, store.ApprovalDenied, store.ApprovalExpired, store.ApprovalVoid:
	default:
		return nil, fmt.Errorf("%w: unknown state %q", ErrBadState, state)
	}
	as, err := s.db.ListApprovals(ctx, state, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*View, 0, len(as))
	for _, a := range as {
		v := view(a)
		// With its injection: a decision the agent never received
		// (dead) must show in every listing, not only when asked for.
		if a.InjectionID != "" {
			if v.Injection, err = s.db.Injection(ctx, a.InjectionID); err != nil {
				return nil, err
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// Get returns an approval with its audit trail, its event trail (verified)
// and injection job.
func (s *Service) Get(ctx context.Context, id string) (*View, error) {
	a, err := s.db.Approval(ctx, id)
	if err != nil {
		return nil, err
	}
	v := view(a)
	if v.Audit, err = s.db.ApprovalAudit(ctx, id); err != nil {
		return nil, err
	}
	v.Why, v.AgentMessage, v.ToolTitle = s.requestContext(ctx, a)
	if v.Trail, err = s.Trail(ctx, id); err != nil {
		return nil, err
	}
	if a.State == store.ApprovalPending && a.Policy != "" {
		ts, err := s.db.ApprovalTimersOf(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if t.Kind == store.TimerRemind || t.Kind == store.TimerEscalate {
				v.Timers = append(v.Timers, t)
			}
		}
	}
	if a.InjectionID != "" {
		if v.Injection, err = s.db.Injection(ctx, a.InjectionID); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// ErrBadState: a list filter names no approval state.
var ErrBadState = errors.New("bad approval state")

// Decide records an operator's decision: "granted" or "denied" (injected
// like any other, decidedBy "operator:<keyID>"), or "void" (the approval is
// withdrawn and nothing is injected). store.ErrAlreadyDecided when the
// approval is no longer pending.
func (s *Service) Decide(ctx context.Context, id, decision, reason, keyID string) (*View, error) {
	state := map[string]string{"granted": store.ApprovalGranted, "denied": store.ApprovalDenied, "void": store.ApprovalVoid}[decision]
	if state == "" {
		return nil, fmt.Errorf("%w (or void), got %q", ErrBadDecision, decision)
	}
	now := s.cfg.Now()
	a, err := s.db.Approval(ctx, id)
	if err != nil {
		return nil, err
	}
	if a.State == store.ApprovalPending && !now.Before(a.ExpiresAt) {
		if _, err := s.expire(ctx, id, now); err != nil && !errors.Is(err, store.ErrAlreadyDecided) {
			return nil, err
		}
	}
	got, err := s.decide(ctx, store.Decision{ApprovalID: id, State: state, Reason: strings.TrimSpace(reason),
		DecidedBy: "operator:" + keyID, Channel: ChannelOperator, At: now})
	if err != nil {
		return nil, err
	}
	return view(got), nil
}

// RetryInjection makes a dead injection of an approval due again.
func (s *Service) RetryInjection(ctx context.Context, id string) (*store.Injection, error) {
	a, err := s.db.Approval(ctx, id)
	if err != nil {
		return nil, err
	}
	if a.InjectionID == "" {
		return nil, fmt.Errorf("approval has no injection: %w", store.ErrBadState)
	}
	inj, err := s.db.RetryInjection(ctx, a.InjectionID, s.cfg.Now())
	if err == nil {
		if w, ok := s.inj.(interface{ Wake() }); ok {
			w.Wake()
		}
	}
	return inj, err
}

// ListByInjection lists the approvals whose injection job is in state st
// (pending, done or dead): `dead` is the operator's dead-letter view.
func (s *Service) ListByInjection(ctx context.Context, st string, limit int) ([]*View, error) {
	switch st {
	case store.InjectionPending, store.InjectionDone, store.InjectionDead:
	default:
		return nil, fmt.Errorf("%w: unknown injection state %q (pending, done or dead)", ErrBadState, st)
	}
	injs, err := s.db.ListInjections(ctx, st, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*View, 0, len(injs))
	for _, inj := range injs {
		a, err := s.db.Approval(ctx, inj.ApprovalID)
		if err != nil {
			return nil, err
		}
		v := view(a)
		v.Injection = inj
		out = append(out, v)
	}
	return out, nil
}
