package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Kinds of approval timer.
const (
	// TimerRemind reminds the people of its step who have not answered.
	TimerRemind = "remind"
	// TimerEscalate asks the step after its own.
	TimerEscalate = "escalate"
	// TimerDecided is the work after a decision (Decision.FollowUpAt): a
	// process that dies before it is done and the timer removed leaves it
	// to the sweep, which does it again. Firing it removes it once the
	// approval is decided; it writes nothing else. One with a Delivery
	// is written by the Record that gives that delivery its provider id
	// after an approval it asks was decided (Outcome.FollowDecision): the
	// work after the decision had no message to act on then, so it is done
	// for that message.
	TimerDecided = "decided"
)

// ApprovalTimer is a durable timer of an approval under a policy with a
// ladder: at Due, remind the people of step Step who have not answered, or
// ask step Step+1. It is written with the approval (NewApproval.Timers) or
// by the firing of the timer before it, and removed by its own firing, in
// that firing's transaction: a timer fires once however many replicas
// sweep and however often beachd is killed. A timer whose approval is no
// longer pending is removed when it comes due, and does nothing.
type ApprovalTimer struct {
	ApprovalID string    `json:"approvalId"`
	Kind       string    `json:"kind"`
	Step       int       `json:"step"`
	Due        time.Time `json:"due"`
	// Delivery, on a TimerDecided timer, names the one message whose
	// provider id was recorded after the decision.
	Delivery string `json:"delivery,omitempty"`
}

// Name is the timer's identity within its approval: its kind and step, and
// its delivery when it names one.
func (t ApprovalTimer) Name() string {
	if t.Delivery != "" {
		return fmt.Sprintf("%s/%d/%s", t.Kind, t.Step, t.Delivery)
	}
	return fmt.Sprintf("%s/%d", t.Kind, t.Step)
}

// LateMessageTimers are the timers a Record writes for delivery d, just
// given its provider id by an outcome with FollowDecision, whose approvals
// (decided, by id) are those of its ApprovalIDs no longer pending at the
// record: one TimerDecided timer for d of each, due at now.
func LateMessageTimers(d *Delivery, o *Outcome, decided map[string]bool, now time.Time) []ApprovalTimer {
	if !o.FollowDecision || o.State != StateSent || d.ProviderID == "" {
		return nil
	}
	var out []ApprovalTimer
	for _, id := range d.ApprovalIDs {
		if decided[id] {
			out = append(out, ApprovalTimer{ApprovalID: id, Kind: TimerDecided, Due: now, Delivery: d.ID})
		}
	}
	return out
}

// TimerFire is what firing a due timer writes, in one transaction with the
// timer's removal, when its approval is still pending.
type TimerFire struct {
	Timer ApprovalTimer
	// Recipients are added to the approval (the people an escalation
	// asks), with their Tokens.
	Recipients []ApprovalRecipient
	Tokens     map[string]TokenBinding
	// Sends are the messages the firing sends, each a delivery of the
	// approval's envelope asking the approval.
	Sends []TimerSend
	// Events are appended to the approval's trail after those of the Sends.
	Events []ApprovalEvent
	// Timers are the approval's next timers.
	Timers []ApprovalTimer
}

// TimerSend is one message of a firing.
type TimerSend struct {
	Delivery NewDelivery
	// NotBefore, when later than the firing, makes the delivery due then
	// (quiet hours).
	NotBefore time.Time
	// Person, when set, skips this send if that person has voted by the
	// time the firing commits (a reminder goes only to who has not
	// answered).
	Person string
	// Event is appended to the trail with the send (and skipped with it).
	Event ApprovalEvent
}

// TimerFired is what FireApprovalTimer did.
type TimerFired struct {
	// Fired: the timer was due, its approval pending, and the firing was
	// written. Otherwise Why says why nothing was: "gone" (fired or
	// removed already) or the approval's state.
	Fired bool
	Why   string
	// Deliveries are the deliveries the firing created.
	Deliveries []*Delivery
	// Skipped counts the sends left out (their person had voted).
	Skipped int
}

// ApprovalTimers are the durable timers of approvals under a policy.
type ApprovalTimers interface {
	// DueApprovalTimers returns up to max timers due at or before now,
	// earliest first.
	DueApprovalTimers(ctx context.Context, now time.Time, max int) ([]ApprovalTimer, error)
	// FireApprovalTimer fires f.Timer: in one transaction it removes the
	// timer and, if the approval is still pending, writes f (TimerFire).
	// A timer already gone answers Fired false, Why "gone".
	FireApprovalTimer(ctx context.Context, f TimerFire) (*TimerFired, error)
	// ApprovalTimersOf lists the pending timers of one approval, by due.
	ApprovalTimersOf(ctx context.Context, id string) ([]ApprovalTimer, error)
}

// TimerWhyGone is TimerFired.Why of a timer that was no longer stored.
const TimerWhyGone = "gone"

// KeepSends are the sends of f to make on a (those whose person has not
// voted), and how many are skipped.
func KeepSends(f *TimerFire, a *Approval) (keep []TimerSend, skipped int) {
	for _, s := range f.Sends {
		if s.Person != "" && slices.ContainsFunc(a.Votes, func(v Vote) bool { return v.Person == s.Person }) {
			skipped++
			continue
		}
		keep = append(keep, s)
	}
	return keep, skipped
}

// WithRecipients is a with the recipients rs added, each (channel,
// address) once.
func WithRecipients(a *Approval, rs []ApprovalRecipient) {
	for _, r := range rs {
		if !slices.ContainsFunc(a.Recipients, func(x ApprovalRecipient) bool { return x.Channel == r.Channel && x.Address == r.Address }) {
			a.Recipients = append(a.Recipients, r)
		}
	}
}

// NewTimerDelivery is the delivery record of send s of a firing on
// approval a's envelope, created at now with id.
func NewTimerDelivery(a *Approval, agent, id string, s TimerSend, now time.Time) *Delivery {
	due := now
	if s.NotBefore.After(now) {
		due = s.NotBefore
	}
	return &Delivery{ID: id, EnvelopeID: a.EnvelopeID, Channel: s.Delivery.Channel, To: s.Delivery.To, Agent: agent,
		State: StateQueued, CreatedAt: now, UpdatedAt: now, NextAttemptAt: due,
		ApprovalIDs: s.Delivery.ApprovalIDs, Extra: s.Delivery.Extra}
}

// SendEvidence is a send's event evidence with its delivery named and,
// when it waits for quiet hours, when it is due.
func SendEvidence(ev map[string]string, d *Delivery) map[string]string {
	out := make(map[string]string, len(ev)+2)
	for k, v := range ev {
		out[k] = v
	}
	out["delivery"] = d.ID
	if d.NextAttemptAt.After(d.CreatedAt) {
		out["due"] = d.NextAttemptAt.UTC().Format(time.RFC3339)
	}
	return out
}
