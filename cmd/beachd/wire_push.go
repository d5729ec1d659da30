package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/store"
)

// kvUpdater is a shared store's atomic change of a value, with a wake-up
// of the replicas at its commit (store/postgres).
type kvUpdater interface {
	UpdateKV(ctx context.Context, key, topic string, change func(val []byte, ok bool) ([]byte, error)) error
}

// pushRelay hands A2A push notifications between the replicas sharing a
// PostgreSQL store (agent.PushRelay). A turn that asks for pushes has a
// value in the store's kv while a replica waits for it,
// pushRelayKey + turn id: the pushes other replicas received for it, not
// yet taken. A replica that receives a push for a turn it does not wait
// for appends it there and wakes the others (agent.PushWakeTopic + " " +
// turn id); the waiting replica takes the pushes, in one transaction, and
// folds them into the turn. The record of a turn whose replica died
// waiting stays: a push for it is refused, and the record removed, once
// that replica's liveness lease has run out, or pushRelayMaxAge after the
// turn started. A replica that resumes a turn after a restart opens its
// record again, as its own: the pushes the old record held are dropped,
// the resumed turn reading the task first.
type pushRelay struct {
	db     store.KV
	up     kvUpdater
	leases store.Leases
	holder string // this replica's
	now    func() time.Time
}

const (
	pushRelayKey    = "a2a-push/"
	pushRelayMaxAge = 48 * time.Hour
)

// pushRecord is one turn's value.
type pushRecord struct {
	Opened  time.Time `json:"opened"`
	Holder  string    `json:"holder,omitempty"` // the waiting replica
	Pushes  [][]byte  `json:"pushes,omitempty"`
	Bytes   int64     `json:"bytes,omitempty"`
	Dropped bool      `json:"dropped,omitempty"`
}

var errNotWaiting = errors.New("no replica waits for this turn")

func (r *pushRelay) Open(ctx context.Context, id string) error {
	b, _ := json.Marshal(pushRecord{Opened: r.now(), Holder: r.holder})
	return r.db.PutKV(ctx, pushRelayKey+id, b)
}

func (r *pushRelay) Close(ctx context.Context, id string) error {
	return r.db.DeleteKV(ctx, pushRelayKey+id)
}

func (r *pushRelay) Forward(ctx context.Context, id string, body []byte, max int64) (bool, error) {
	key := pushRelayKey + id
	// A record whose replica died waiting: nobody takes its pushes.
	val, ok, err := r.db.GetKV(ctx, key)
	if err != nil || !ok {
		return false, err
	}
	var rec pushRecord
	if err := json.Unmarshal(val, &rec); err != nil {
		return false, fmt.Errorf("turn %s's pushes: %w", id, err)
	}
	if dead, err := r.dead(ctx, rec); err != nil {
		return false, err
	} else if dead {
		return false, r.db.DeleteKV(ctx, key)
	}
	err = r.up.UpdateKV(ctx, key, agent.PushWakeTopic+" "+id, func(val []byte, ok bool) ([]byte, error) {
		if !ok {
			return nil, errNotWaiting
		}
		var rec pushRecord
		if err := json.Unmarshal(val, &rec); err != nil {
			return nil, fmt.Errorf("turn %s's pushes: %w", id, err)
		}
		if rec.Bytes+int64(len(body)) > max {
			rec.Dropped = true
		} else {
			rec.Pushes = append(rec.Pushes, body)
			rec.Bytes += int64(len(body))
		}
		return json.Marshal(rec)
	})
	if errors.Is(err, errNotWaiting) {
		return false, nil
	}
	return err == nil, err
}

// dead reports whether the replica that waits for rec's turn is gone:
// its liveness lease ran out, or the turn started pushRelayMaxAge ago.
func (r *pushRelay) dead(ctx context.Context, rec pushRecord) (bool, error) {
	if r.now().Sub(rec.Opened) > pushRelayMaxAge {
		return true, nil
	}
	if rec.Holder == "" || r.leases == nil {
		return false, nil
	}
	ls, err := r.leases.ListLeases(ctx)
	if err != nil {
		return false, err
	}
	name := store.LivenessLease(rec.Holder)
	for _, l := range ls {
		if l.Name == name {
			return !l.Until.After(r.now()), nil
		}
	}
	return false, nil // not taken yet: the replica is starting
}

func (r *pushRelay) Take(ctx context.Context, id string) (pushes [][]byte, dropped bool, err error) {
	err = r.up.UpdateKV(ctx, pushRelayKey+id, "", func(val []byte, ok bool) ([]byte, error) {
		if !ok {
			return nil, nil
		}
		var rec pushRecord
		if err := json.Unmarshal(val, &rec); err != nil {
			return nil, fmt.Errorf("turn %s's pushes: %w", id, err)
		}
		if len(rec.Pushes) == 0 && !rec.Dropped {
			return nil, nil
		}
		pushes, dropped = rec.Pushes, rec.Dropped
		return json.Marshal(pushRecord{Opened: rec.Opened, Holder: rec.Holder})
	})
	return pushes, dropped, err
}

// wirePushRelay makes the replicas of a shared store accept each other's
// pushes.
func (a *app) wirePushRelay(p *agent.Pushes) {
	up, ok := a.db.(kvUpdater)
	if !ok || !a.db.Shared() {
		return
	}
	p.UseRelay(&pushRelay{db: a.db, up: up, leases: a.db, holder: a.singletons.Holder(), now: a.now})
	a.onWakeArg(agent.PushWakeTopic, p.Relayed)
}
