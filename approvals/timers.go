package approvals

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/cool-ai/beachd/approvals/policy"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// stepTimers are the timers of step i of pol for approval id, asked at
// now: its reminder, and its escalation when a step follows.
func stepTimers(pol *policy.Policy, id string, i int, now time.Time) []store.ApprovalTimer {
	st := pol.Steps[i]
	var out []store.ApprovalTimer
	if st.RemindAfter > 0 {
		out = append(out, store.ApprovalTimer{ApprovalID: id, Kind: store.TimerRemind, Step: i, Due: now.Add(st.RemindAfter)})
	}
	if st.EscalateAfter > 0 && i+1 < len(pol.Steps) {
		out = append(out, store.ApprovalTimer{ApprovalID: id, Kind: store.TimerEscalate, Step: i, Due: now.Add(st.EscalateAfter)})
	}
	return out
}

// deferred is when a message of a reminder or escalation on channel goes
// out: now, or for SMS and WhatsApp within pol's quiet hours, their end.
func deferred(pol *policy.Policy, channel string, now time.Time) time.Time {
	if pol.QuietHours == nil || (channel != envelope.ChannelSMS && channel != envelope.ChannelWhatsApp) {
		return now
	}
	return pol.QuietHours.Defer(now)
}

// FireTimers fires every approval timer due at now, and returns how many
// fired (sent a reminder or asked the next step).
func (s *Service) FireTimers(ctx context.Context) (int, error) {
	n := 0
	for {
		now := s.cfg.Now()
		due, err := s.db.DueApprovalTimers(ctx, now, 100)
		if err != nil {
			return n, err
		}
		if len(due) == 0 {
			return n, nil
		}
		for _, t := range due {
			fired, err := s.fireTimer(ctx, t, now)
			if err != nil {
				return n, err
			}
			if fired {
				n++
			}
		}
	}
}

// fireTimer fires t: what it sends is worked out from the approval as it
// stands, and the store writes it only if the timer is still there and
// the approval pending (a reminder skips who has voted meanwhile).
func (s *Service) fireTimer(ctx context.Context, t store.ApprovalTimer, now time.Time) (bool, error) {
	f := store.TimerFire{Timer: t}
	a, err := s.db.Approval(ctx, t.ApprovalID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return false, err
	case t.Kind == store.TimerDecided:
		if a.State == store.ApprovalPending {
			break // cannot happen: the timer is written with the decision
		}
		switch {
		case t.Delivery != "" && s.cfg.OnMessageShown != nil:
			s.log.Info("the work after a decision for a message recorded after it", "approval_id", a.ID, "delivery_id", t.Delivery)
			s.cfg.OnMessageShown(ctx, a, t.Delivery)
		case s.cfg.OnDecided != nil:
			s.log.Info("redoing the work after a decision its process did not finish", "approval_id", a.ID)
			s.cfg.OnDecided(ctx, a)
		}
	case a.State == store.ApprovalPending:
		pol := s.cfg.Policies.Policy(a.Policy)
		if pol == nil || t.Step >= len(pol.Steps) {
			// The policy left the configuration (or lost the step):
			// the timer is removed without sending anything.
			s.log.Warn("approval timer of a policy no longer configured: removed", "approval_id", a.ID, "policy", a.Policy, "timer", t.Name())
			break
		}
		switch t.Kind {
		case store.TimerRemind:
			s.planReminder(pol, a, t, now, &f)
		case store.TimerEscalate:
			if err := s.planEscalation(ctx, pol, a, t, now, &f); err != nil {
				return false, err
			}
		}
	}
	out, err := s.db.FireApprovalTimer(ctx, f)
	if err != nil {
		return false, err
	}
	if !out.Fired {
		return false, nil
	}
	s.log.Info("approval timer fired", "approval_id", t.ApprovalID, "policy", a.Policy, "timer", t.Name(),
		"messages", len(out.Deliveries), "skipped", out.Skipped)
	if len(out.Deliveries) > 0 && s.cfg.Notify != nil {
		s.cfg.Notify()
	}
	return true, nil
}

// planReminder fills f with a reminder to each recipient of a's step
// t.Step whose person has not voted (the store checks again as it
// writes).
func (s *Service) planReminder(pol *policy.Policy, a *store.Approval, t store.ApprovalTimer, now time.Time, f *store.TimerFire) {
	for _, r := range a.Recipients {
		if r.Step != t.Step {
			continue
		}
		f.Sends = append(f.Sends, store.TimerSend{
			Delivery: store.NewDelivery{Channel: r.Channel, To: r.Address, ApprovalIDs: []string{a.ID},
				Extra: map[string]string{envelope.ExtraApprovalNotice: envelope.NoticeReminder}},
			NotBefore: deferred(pol, r.Channel, now),
			Person:    r.Person,
			Event: store.ApprovalEvent{At: now, Kind: store.EventReminded, Actor: r.Address, Channel: r.Channel,
				Evidence: map[string]string{"policy": pol.Name, "step": strconv.Itoa(t.Step + 1), "person": r.Person}},
		})
	}
}

// planEscalation fills f with step t.Step+1 of pol: each of its people on
// each of their channels gets a token of their own and a message (a
// recipient already asked by an earlier step is not asked again), then the
// step's own timers.
func (s *Service) planEscalation(ctx context.Context, pol *policy.Policy, a *store.Approval, t store.ApprovalTimer, now time.Time, f *store.TimerFire) error {
	next := t.Step + 1
	if next >= len(pol.Steps) {
		return nil
	}
	f.Tokens = map[string]store.TokenBinding{}
	asked := map[string]bool{}
	for _, r := range a.Recipients {
		asked[r.Channel+"\x00"+r.Address] = true
	}
	for _, p := range stepPeople(pol, next, nil) {
		for _, r := range p.Channels {
			addr := foldAddress(r.Channel, r.Target())
			if asked[r.Channel+"\x00"+addr] {
				continue
			}
			asked[r.Channel+"\x00"+addr] = true
			rc, err := s.mintRecipient(ctx, a.ID, r.Channel, addr, f.Tokens)
			if err != nil {
				return err
			}
			rc.Person, rc.Step = p.ID(), next
			f.Recipients = append(f.Recipients, rc)
			f.Sends = append(f.Sends, store.TimerSend{
				Delivery: store.NewDelivery{Channel: r.Channel, To: r.Target(), ApprovalIDs: []string{a.ID},
					Extra: map[string]string{envelope.ExtraApprovalNotice: envelope.NoticeEscalation}},
				NotBefore: deferred(pol, r.Channel, now),
				Event: store.ApprovalEvent{At: now, Kind: store.EventAsked, Actor: addr, Channel: r.Channel,
					Evidence: map[string]string{"policy": pol.Name, "step": strconv.Itoa(next + 1), "person": p.ID()}},
			})
		}
	}
	f.Events = []store.ApprovalEvent{{At: now, Kind: store.EventEscalated, Actor: DecidedByPolicy(pol.Name),
		Evidence: map[string]string{"step": strconv.Itoa(next + 1), "after": pol.Steps[t.Step].EscalateAfter.String(),
			"people": strconv.Itoa(len(stepPeople(pol, next, nil)))}}}
	f.Timers = stepTimers(pol, a.ID, next, now)
	return nil
}

// decidedNote is what a policy's reminder or escalation that goes out after
// the decision says instead of asking.
func decidedNote(a *store.Approval) string {
	what := a.State
	switch a.State {
	case store.ApprovalVoid:
		what = "withdrawn"
	case store.ApprovalExpired:
		what = "expired"
	}
	return "This request was already decided (" + what + "); nothing more is needed from you."
}

// followUpGrace is how long after a decision its follow-up timer comes due:
// longer than the deciding process takes to call OnDecided and remove it.
const followUpGrace = 10 * time.Second

// followUp does the work after a's decision (OnDecided), then removes the
// timer written with it (due at due): a crash before the removal leaves
// the work to the sweeper, done twice rather than never.
func (s *Service) followUp(ctx context.Context, a *store.Approval, due time.Time) {
	s.cfg.OnDecided(ctx, a)
	t := store.ApprovalTimer{ApprovalID: a.ID, Kind: store.TimerDecided, Due: due}
	if _, err := s.db.FireApprovalTimer(context.WithoutCancel(ctx), store.TimerFire{Timer: t}); err != nil {
		s.log.Warn("remove the decision's follow-up timer (the sweeper will redo the follow-up)", "approval_id", a.ID, "err", err)
	}
}
