package approvals

import (
	"context"
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
	// TODO(quorum, steps): asked by the policy's people; until then the
	// delivery's recipients are asked as without a policy.
	for i, r := range to {
		addr := foldAddress(r.Channel, r.Target())
		rc, err := s.mintRecipient(ctx, na.Approval.ID, r.Channel, addr, na.Tokens)
		if err != nil {
			return err
		}
		na.Approval.Recipients = append(na.Approval.Recipients, rc)
		per[i] = append(per[i], na.Approval.ID)
	}
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
