package approvals

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cool-ai/beachd/approvals/policy"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// DecidedByPolicy is the decidedBy of a decision a policy took: "policy:"
// and its name.
func DecidedByPolicy(name string) string { return "policy:" + name }

// preparePolicy fills na, an approval governed by pol, at ingest. A policy
// that decides decides it in the ingest's transaction, and the delivery's
// recipients are told, not asked (per: every recipient's delivery carries
// the approval, which renders without a way to answer).
func (s *Service) preparePolicy(ctx context.Context, pol *policy.Policy, na *store.NewApproval, to []envelope.Recipient, per [][]string, now time.Time) error {
	na.Approval.Policy = pol.Name
	if pol.Decide != "" {
		state := store.ApprovalGranted
		if pol.Decide == policy.DecideDenied {
			state = store.ApprovalDenied
		}
		na.Decision = &store.Decision{State: state, Reason: "decided by policy " + pol.Name, DecidedBy: DecidedByPolicy(pol.Name),
			Channel: ChannelPolicy, At: now, InjectionID: s.db.NewID("inj_")}
		for i := range to {
			per[i] = append(per[i], na.Approval.ID)
		}
		return nil
	}
	return s.askStep(ctx, pol, na, 0, to, per, now)
}

// stepPeople are the people step i of pol asks: its own, or, for `to:
// envelope`, each recipient of the request.
func stepPeople(pol *policy.Policy, i int, to []envelope.Recipient) []policy.Person {
	st := pol.Steps[i]
	if !st.Envelope {
		return st.People
	}
	out := make([]policy.Person, 0, len(to))
	for _, r := range to {
		r.Address = foldAddress(r.Channel, r.Target())
		if spec, ok := envelope.Channel(r.Channel); ok && spec.Address == envelope.AddressEndpoint {
			r.Endpoint = r.Address
		}
		out = append(out, policy.Person{Channels: []envelope.Recipient{r}})
	}
	return out
}

// reachable counts the distinct people every step of pol would ask.
func reachable(pol *policy.Policy, to []envelope.Recipient) int {
	seen := map[string]bool{}
	for i := range pol.Steps {
		for _, p := range stepPeople(pol, i, to) {
			seen[p.ID()] = true
		}
	}
	return len(seen)
}

// askStep asks approval na of the people of pol's step i, at ingest:
// each person on each of their channels gets a token of their own, on the
// request's own delivery when they are one of its recipients, else on a
// delivery of their own (na.Ask). At step 0 the request's recipients who
// are not asked are told, not asked (their delivery carries the approval,
// which renders without a way to answer).
func (s *Service) askStep(ctx context.Context, pol *policy.Policy, na *store.NewApproval, i int, to []envelope.Recipient, per [][]string, now time.Time) error {
	a := &na.Approval
	a.Quorum = pol.Quorum
	if n := reachable(pol, to); n < pol.Quorum {
		return &envelope.ValidationError{Problems: []envelope.Problem{{Path: "to",
			Reason: fmt.Sprintf("approval policy %s needs %d people to grant %s, and its steps with this request's recipients name %d: it could never be approved",
				pol.Name, pol.Quorum, a.ID, n)}}}
	}
	told := make([]bool, len(to))
	for _, p := range stepPeople(pol, i, to) {
		for _, r := range p.Channels {
			addr := foldAddress(r.Channel, r.Target())
			rc, err := s.mintRecipient(ctx, a.ID, r.Channel, addr, na.Tokens)
			if err != nil {
				return err
			}
			rc.Person, rc.Step = p.ID(), i
			a.Recipients = append(a.Recipients, rc)
			na.Events = append(na.Events, store.ApprovalEvent{At: now, Kind: store.EventAsked, Actor: addr, Channel: r.Channel,
				Evidence: map[string]string{"policy": pol.Name, "step": strconv.Itoa(i + 1), "person": p.ID()}})
			j := slices.IndexFunc(to, func(t envelope.Recipient) bool {
				return t.Channel == r.Channel && foldAddress(t.Channel, t.Target()) == addr
			})
			if j >= 0 {
				per[j] = append(per[j], a.ID)
				told[j] = true
				continue
			}
			na.Ask = append(na.Ask, store.NewDelivery{Channel: r.Channel, To: r.Target(), ApprovalIDs: []string{a.ID}})
		}
	}
	for j := range to {
		if !told[j] {
			per[j] = append(per[j], a.ID)
		}
	}
	na.Timers = stepTimers(pol, a.ID, i, now)
	return nil
}

// policyNote is what a recipient who is told of an approval under a
// policy, and not asked, reads instead of a way to answer.
func policyNote(a *store.Approval) (decided bool, note string) {
	switch {
	case a.State == store.ApprovalGranted && a.DecidedBy == DecidedByPolicy(a.Policy):
		return true, "Approved automatically by policy " + a.Policy + "; nobody was asked."
	case a.State == store.ApprovalDenied && a.DecidedBy == DecidedByPolicy(a.Policy):
		return true, "Denied automatically by policy " + a.Policy + "; nobody was asked."
	}
	return false, "This request awaits approval by others; you are not asked to answer it."
}

// Committed implements the ingest's optional after-commit hook: the
// approvals decided at ingest have their injections queued, and the
// injector is woken to take them at once.
func (s *Service) Committed(ctx context.Context, as []store.NewApproval) {
	for _, na := range as {
		if na.Decision != nil {
			s.log.Info("approval decided by policy", "approval_id", na.Approval.ID, "policy", na.Approval.Policy, "decision", na.Decision.State)
			if w, ok := s.inj.(interface{ Wake() }); ok {
				w.Wake()
			}
		}
	}
}

// personOf is the person of an approval under a quorum whom binding b was
// issued to; "" when the approval has no quorum (the first answer
// decides).
func personOf(a *store.Approval, b *store.TokenBinding) string {
	if a.Quorum == 0 {
		return ""
	}
	for _, r := range a.Recipients {
		if r.Channel == b.Channel && r.Address == b.Recipient {
			return r.Person
		}
	}
	return b.Recipient
}

// tallyText says truthfully where a quorum stands after a vote:
// "1 of 2 approvals; waiting for the others."
func tallyText(a *store.Approval) string {
	grants, quorum := a.Tally()
	return fmt.Sprintf("%d of %d approvals; waiting for the others.", grants, quorum)
}

// viewerPerson is the person of a's recipient addr (any channel).
func viewerPerson(a *store.Approval, addr string) string {
	for _, r := range a.Recipients {
		if r.Address == addr {
			return r.Person
		}
	}
	return addr
}
