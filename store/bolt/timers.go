package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cool-ai/beachd/store"
	"go.etcd.io/bbolt"
)

// bApprovalTimers holds the approvals' durable timers (store.ApprovalTimer),
// keyed by when they are due so that the sweep reads the due ones first.
var bApprovalTimers = []byte("approval_timers") // be64(due) + approval id + 0 + kind/step → ApprovalTimer

func timerKey(t store.ApprovalTimer) []byte {
	k := timeKey(t.Due, t.ApprovalID)
	k = append(k, 0)
	return append(k, t.Name()...)
}

// putTimersTx writes timers in the caller's transaction.
func putTimersTx(tx *bbolt.Tx, ts []store.ApprovalTimer) error {
	b := tx.Bucket(bApprovalTimers)
	for _, t := range ts {
		if err := putJSON(b, timerKey(t), t); err != nil {
			return err
		}
	}
	return nil
}

// DueApprovalTimers returns up to max timers due at or before now, earliest
// first.
func (s *DB) DueApprovalTimers(ctx context.Context, now time.Time, max int) ([]store.ApprovalTimer, error) {
	var out []store.ApprovalTimer
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bApprovalTimers).Cursor()
		limit := be64(now)
		for k, v := c.First(); k != nil && bytes.Compare(k[:8], limit) <= 0 && len(out) < max; k, v = c.Next() {
			var t store.ApprovalTimer
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("approval timer %q: %w: %v", k, store.ErrCorrupt, err)
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// ApprovalTimersOf lists the timers of approval id, by due.
func (s *DB) ApprovalTimersOf(ctx context.Context, id string) ([]store.ApprovalTimer, error) {
	var out []store.ApprovalTimer
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bApprovalTimers).ForEach(func(k, v []byte) error {
			var t store.ApprovalTimer
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("approval timer %q: %w: %v", k, store.ErrCorrupt, err)
			}
			if t.ApprovalID == id {
				out = append(out, t)
			}
			return nil
		})
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].Due.Before(out[j].Due) })
	return out, err
}

// FireApprovalTimer removes f.Timer and, when its approval is pending,
// writes the firing, in one transaction.
func (s *DB) FireApprovalTimer(ctx context.Context, f store.TimerFire) (*store.TimerFired, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, snd := range f.Sends {
		if !validChannelName(snd.Delivery.Channel) {
			return nil, fmt.Errorf("fire approval timer: %w: channel %q is not a channel name", store.ErrBadState, snd.Delivery.Channel)
		}
	}
	ids := make([]string, len(f.Sends))
	for i := range ids {
		ids[i] = s.NewID("dlv_")
	}
	now := s.now()
	var out *store.TimerFired
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		out = &store.TimerFired{}
		b := tx.Bucket(bApprovalTimers)
		k := timerKey(f.Timer)
		if b.Get(k) == nil {
			out.Why = store.TimerWhyGone
			return nil
		}
		if err := b.Delete(k); err != nil {
			return err
		}
		var a store.Approval
		switch err := getJSON(tx.Bucket(bApprovals), []byte(f.Timer.ApprovalID), &a); {
		case errors.Is(err, store.ErrNotFound):
			out.Why = store.TimerWhyGone // removed by retention: so is its timer
			return nil
		case err != nil:
			return fmt.Errorf("approval %q: %w", f.Timer.ApprovalID, err)
		}
		if f.Timer.Kind == store.TimerDecided || a.State != store.ApprovalPending {
			out.Fired, out.Why = f.Timer.Kind == store.TimerDecided && a.State != store.ApprovalPending, a.State
			return nil
		}
		keep, skipped := store.KeepSends(&f, &a)
		out.Fired, out.Skipped = true, skipped
		store.WithRecipients(&a, f.Recipients)
		if err := putJSON(tx.Bucket(bApprovals), []byte(a.ID), a); err != nil {
			return err
		}
		for h, tb := range f.Tokens {
			if err := putJSON(tx.Bucket(bApprovalTokens), []byte(h), tb); err != nil {
				return err
			}
		}
		if err := putCodeGuardsTx(tx, &a); err != nil {
			return err
		}
		if len(keep) > 0 {
			var rec store.EnvelopeRecord
			if err := getEnvelope(tx.Bucket(bEnvelopes), []byte(a.EnvelopeID), &rec); err != nil {
				return fmt.Errorf("envelope %s of approval %s: %w", a.EnvelopeID, a.ID, err)
			}
			for i, snd := range keep {
				d := store.NewTimerDelivery(&a, rec.Agent, ids[i], snd, now)
				if err := putNewDeliveryTx(tx, d, time.Time{}); err != nil {
					return err
				}
				rec.DeliveryIDs = append(rec.DeliveryIDs, d.ID)
				out.Deliveries = append(out.Deliveries, d)
				ev := snd.Event
				if ev.Kind != "" {
					ev.Evidence = store.SendEvidence(ev.Evidence, d)
					if _, err := appendEventTx(tx, a.ID, ev, now); err != nil {
						return err
					}
				}
			}
			if err := tx.Bucket(bEnvelopes).Put([]byte(rec.ID), encodeEnvelope(&rec)); err != nil {
				return err
			}
		}
		for _, e := range f.Events {
			if _, err := appendEventTx(tx, a.ID, e, now); err != nil {
				return err
			}
		}
		return putTimersTx(tx, f.Timers)
	})
	if err != nil {
		return nil, fmt.Errorf("fire approval timer %s of %s: %w", f.Timer.Name(), f.Timer.ApprovalID, err)
	}
	return out, nil
}
