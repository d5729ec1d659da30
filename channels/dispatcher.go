package channels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

// HandleSource gives the approval handles (tokens, codes, links, buttons)
// for a delivery's recipient and channel. The approvals package implements
// it; a nil HandleSource means deliveries carry no handles.
type HandleSource interface {
	Handles(ctx context.Context, d *store.Delivery, env *envelope.Envelope) ([]render.ApprovalHandle, error)
}

// Admitter is an optional capability of a Deliverer: per-endpoint limits.
// Admit is called inside the claim transaction and must be fast and free of
// I/O; it sees only the job's ID, Channel and To, in a value it must not
// keep. A job it admits is later released with Done (given the whole
// delivery). A refusal applies to the recipient: its other due jobs are not
// offered again in the same claim.
type Admitter interface {
	Admit(d *store.Delivery) bool
	Done(d *store.Delivery)
}

// ChannelAdmitter is an Admitter whose refusals hold for its whole channel
// (a sender's rate limit, a connection pool): once it refuses a job, a
// claim passes over the channel's other due jobs without reading or
// offering them, so a long backlog on the channel costs other channels
// nothing.
type ChannelAdmitter interface {
	Admitter
	RefusesChannel()
}

// Observer receives the dispatcher's events, for metrics. All methods must
// be cheap and safe for concurrent use.
type Observer interface {
	Attempted(channel, outcome string, took time.Duration)
	Delivered(channel string, sinceAccepted time.Duration)
}

// DispatcherConfig tunes the dispatcher. Zero values are defaults.
type DispatcherConfig struct {
	// Workers bounds concurrent sends; default 32.
	Workers int
	// ClaimBatch bounds one claim transaction; default Workers.
	ClaimBatch int
	// Policies per channel; a channel without one uses its spec's profile
	// (DefaultPolicy), and a deliverer for a channel with neither is
	// refused by NewDispatcher.
	Policies map[string]Policy
	// IdleWait bounds a sleep when nothing is due; default 1s.
	IdleWait time.Duration
	Now      func() time.Time
	// Jitter returns a value in [0,1); default math/rand.
	Jitter func() float64
	// ShutdownGrace is how long sends in flight may go on once Run's
	// context ends; default 10s.
	ShutdownGrace time.Duration
	// Envelopes, when set, holds envelopes decoded at ingest; a job whose
	// envelope is not there reads it from the store.
	Envelopes *EnvelopeCache
	// Shared says other processes use the store too (store.Store.Shared):
	// their leases are live, and only those that ran out are re-queued.
	Shared bool
}

// Outbox is the part of the store a Dispatcher works: it claims due jobs,
// records their outcomes and reads their envelopes. Every store.Deliveries
// is one.
type Outbox interface {
	ClaimAdmitting(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) store.Admission) ([]*store.Delivery, error)
	Record(ctx context.Context, id string, leaseUntil time.Time, o store.Outcome) (*store.Delivery, error)
	Release(ctx context.Context, id string, leaseUntil, at time.Time) error
	RequeueExpired(ctx context.Context, before time.Time) (int, error)
	NextDue() (t time.Time, ok bool)
	Envelope(ctx context.Context, id string) (*store.EnvelopeRecord, error)
	Envelopes(ctx context.Context, ids []string) ([]*store.EnvelopeRecord, error)
}

var _ Outbox = store.Deliveries(nil)

// Dispatcher claims due jobs, hands them to their channel's Deliverer and
// records the outcome.
type Dispatcher struct {
	cfg        DispatcherConfig
	db         Outbox
	deliverers map[string]Deliverer
	handles    HandleSource
	log        *slog.Logger
	obs        Observer
	lease      time.Duration
	wake       chan struct{}
	buf        buffer
	// wakes counts Notify calls; drainedAt is 1 + the count read before
	// the last claim that took every job due and refused none. The queue
	// is drained while drainedAt == wakes+1 (no wake-up since that claim
	// began). Hand-offs are taken only then, so that a fresh delivery
	// never overtakes due ones.
	wakes, drainedAt atomic.Uint64
}

// drained reports whether no job is known to wait to be claimed.
func (d *Dispatcher) drained() bool { return d.drainedAt.Load() == d.wakes.Load()+1 }

// NewDispatcher builds a dispatcher. It starts nothing; call Run.
func NewDispatcher(cfg DispatcherConfig, db Outbox, deliverers map[string]Deliverer, handles HandleSource, obs Observer, log *slog.Logger) (*Dispatcher, error) {
	if db == nil {
		return nil, errors.New("dispatcher: nil store")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 32
	}
	if cfg.ClaimBatch <= 0 {
		cfg.ClaimBatch = cfg.Workers
	}
	if cfg.IdleWait <= 0 {
		cfg.IdleWait = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Jitter == nil {
		cfg.Jitter = defaultJitter
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	policies := make(map[string]Policy, len(deliverers))
	for ch := range deliverers {
		p, ok := cfg.Policies[ch]
		if !ok {
			var err error
			if p, err = DefaultPolicy(ch); err != nil {
				return nil, fmt.Errorf("dispatcher: a deliverer for channel %q, which has no retry policy: %w", ch, err)
			}
		}
		policies[ch] = p
	}
	cfg.Policies = policies
	lease := time.Duration(0)
	for ch := range deliverers {
		if t := cfg.policy(ch).Timeout; t > lease {
			lease = t
		}
	}
	// A lease outlives the longest attempt by a margin, so that only a dead
	// or hung worker loses its job.
	lease = lease*2 + 30*time.Second
	return &Dispatcher{cfg: cfg, db: db, deliverers: deliverers, handles: handles, log: log, obs: obs,
		lease: lease, wake: make(chan struct{}, 1)}, nil
}

// policy is the channel's policy, resolved by NewDispatcher for every
// channel with a deliverer; a job of another channel fails permanently
// before the policy is read.
func (c DispatcherConfig) policy(channel string) Policy { return c.Policies[channel] }

// Notify wakes the dispatcher: new jobs may be due. It never blocks.
func (d *Dispatcher) Notify() {
	d.wakes.Add(1)
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx ends, then waits for the sends in flight and
// returns nil. At start every job a previous process left leased is
// re-queued when the store is this process's alone (none is live); on a
// shared store the other replicas' leases are live, and only those that
// ran out are re-queued, at start and every 10 s.
//
// Claims come in batches: a pool of Workers goroutines takes jobs from a
// buffer of the same size, and the buffer is refilled when half of it is
// free (or it is empty), so one claim serves many jobs; claims and the
// workers' outcome records ride in the store's group commits with the
// ingests. Fresh deliveries may skip the claim: ingest hands them to the
// buffer already leased (Reserve, Hand). A worker frees its endpoint slot
// when the send ends and then waits for its outcome's commit. Jobs still
// buffered when ctx ends are released unattempted.
func (d *Dispatcher) Run(ctx context.Context) error {
	before := d.cfg.Now()
	if !d.cfg.Shared {
		before = before.Add(100 * 365 * 24 * time.Hour)
	}
	if n, err := d.db.RequeueExpired(ctx, before); err != nil {
		return err
	} else if n > 0 {
		d.log.Info("re-queued jobs interrupted by the previous run", "count", n)
	}
	jobs := d.buf.open(d.cfg.Workers)
	freed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for i := 0; i < d.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker's own context: an attempt registers its
			// shutdown grace (context.AfterFunc) with it, not with Run's
			// context, whose lock every worker would otherwise share.
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for j := range jobs {
				d.buf.taken(j.handed)
				if wctx.Err() != nil {
					d.release(j.del)
					continue
				}
				d.work(wctx, j.del, j.rec)
				select {
				case freed <- struct{}{}:
				default:
				}
			}
		}()
	}
	defer func() {
		d.buf.close()
		wg.Wait()
	}()
	lastSweep := d.cfg.Now()
	for {
		if ctx.Err() != nil {
			return nil
		}
		room, used := d.buf.room()
		want := min(room, d.cfg.ClaimBatch)
		claimedAll, refused := false, 0
		tried := want > 0 && (room >= max(1, d.cfg.Workers/2) || used == 0)
		if tried {
			wakes := d.wakes.Load()
			want = d.buf.take(want) // hand-offs may have taken some meanwhile
			var admitted []*store.Delivery
			admit := func(del *store.Delivery) store.Admission {
				if a := d.admit(del); a != store.Admit {
					refused++
					return a
				}
				// del is the store's scratch value: keep a copy.
				admitted = append(admitted, &store.Delivery{ID: del.ID, Channel: del.Channel, To: del.To})
				return store.Admit
			}
			claimed, err := d.db.ClaimAdmitting(ctx, want, d.lease, admit)
			if err != nil {
				// The claim did not commit: give back what Admit reserved.
				d.buf.give(want)
				for _, del := range admitted {
					d.done(del)
				}
				if ctx.Err() != nil {
					return nil
				}
				d.log.Error("claim due jobs", "err", err)
				if !sleep(ctx, time.Second) {
					return nil
				}
				continue
			}
			d.buf.give(want - len(claimed))
			recs := d.prefetch(ctx, claimed)
			for i, del := range claimed {
				d.buf.put(job{del: del, rec: recs[i]}) // never blocks: its slot was taken
			}
			claimedAll = want > 0 && len(claimed) == want
			if len(claimed) < want && refused == 0 {
				d.drainedAt.Store(wakes + 1)
			} else {
				d.drainedAt.Store(0)
			}
		}
		if now := d.cfg.Now(); now.Sub(lastSweep) > 10*time.Second {
			lastSweep = now
			if n, err := d.db.RequeueExpired(ctx, now); err != nil && ctx.Err() == nil {
				d.log.Error("re-queue expired leases", "err", err)
			} else if n > 0 {
				d.log.Warn("re-queued jobs whose lease ran out", "count", n)
			}
		}
		if claimedAll {
			continue // there may be more due right now
		}
		wait := d.cfg.IdleWait
		if tried {
			// (When the buffer was too full to claim, only a freed worker
			// can change that: due jobs must not make the loop spin, and
			// the store is not asked, as it would be after every job.)
			if t, ok := d.db.NextDue(); ok {
				if w := t.Sub(d.cfg.Now()); w < wait {
					wait = max(w, time.Millisecond)
				}
			}
		}
		if refused > 0 {
			// Due jobs were refused (an endpoint at its concurrency limit or
			// with an open circuit): they stay due, so NextDue is in the
			// past. Wait for a send to finish or a short while instead of
			// claiming again at once.
			wait = max(wait, min(d.cfg.IdleWait, 200*time.Millisecond))
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-d.wake:
		case <-freed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// release puts a claimed, unattempted job back in the queue.
func (d *Dispatcher) release(del *store.Delivery) {
	d.done(del)
	if err := d.db.Release(context.Background(), del.ID, del.LeaseUntil, d.cfg.Now()); err != nil {
		d.log.Warn("release a claimed job at shutdown; its lease will expire instead", "delivery_id", del.ID, "err", err)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// done gives back the endpoint slot admit reserved for del.
func (d *Dispatcher) done(del *store.Delivery) {
	if a, ok := d.deliverers[del.Channel].(Admitter); ok {
		a.Done(del)
	}
}

func (d *Dispatcher) admit(del *store.Delivery) store.Admission {
	a, ok := d.deliverers[del.Channel].(Admitter)
	switch {
	case !ok || a.Admit(del):
		return store.Admit
	case isChannelAdmitter(a):
		return store.RefuseChannel
	}
	return store.RefuseRecipient
}

func isChannelAdmitter(a Admitter) bool {
	_, ok := a.(ChannelAdmitter)
	return ok
}

// work runs one attempt. It never panics: a panicking Deliverer costs a
// temporary failure.
func (d *Dispatcher) work(ctx context.Context, del *store.Delivery, envRec *store.EnvelopeRecord) {
	deliverer, ok := d.deliverers[del.Channel]
	// Built only when there is something to say: a sent job logs nothing.
	log := func() *slog.Logger {
		return d.log.With("delivery_id", del.ID, "channel", del.Channel, "attempt", del.Attempts+1)
	}
	policy := d.cfg.policy(del.Channel)
	start := d.cfg.Now()
	var res *Result
	var err error
	if !ok {
		err = Permanent(fmt.Errorf("channel %q is not configured on this beachd", del.Channel))
	} else {
		res, err = d.attempt(ctx, deliverer, del, envRec, policy)
	}
	took := d.cfg.Now().Sub(start)
	// The endpoint's slot is free once the attempt is over (attempt
	// recovers panics); the outcome is recorded after.
	d.done(del)
	o := store.Outcome{Attempt: store.Attempt{At: start, Duration: took}}
	outcome := "sent"
	if err == nil {
		o.State = store.StateSent
		o.Attempt.Outcome = "sent"
		if res != nil {
			o.ProviderID = res.ProviderID
			o.Attempt.Receipt = res.Receipt.marshal()
			o.FollowDecision = res.FollowDecision
		}
	} else {
		e := AsError(err)
		o.Error = e.Err.Error()
		o.Attempt.Error = o.Error
		o.MaybeSent = e.MaybeSent
		o.ProviderID = e.ProviderID
		if e.Receipt != nil {
			o.Attempt.Receipt = e.Receipt.marshal()
		}
		lifeStart := del.CreatedAt
		if r, ok := del.Extra["retriedAt"]; ok {
			if t, perr := time.Parse(time.RFC3339Nano, r); perr == nil {
				lifeStart = t
			}
		}
		next, retry := time.Time{}, false
		switch {
		case e.Permanent:
		case e.RateLimited && e.RetryAfter > 0:
			next = d.cfg.Now().Add(e.RetryAfter)
			retry = policy.Lifetime <= 0 || !next.After(lifeStart.Add(policy.Lifetime))
		default:
			next, retry = policy.Next(del.Attempts+1, lifeStart, d.cfg.Now(), e.RetryAfter, d.cfg.Jitter)
		}
		if !e.Permanent && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Cut off by shutdown, not by the peer: due again at once.
			next, retry = d.cfg.Now(), true
		}
		switch {
		case retry:
			o.State, o.NextAttemptAt, outcome = store.StateRetrying, next, "retry"
			log().Warn("delivery attempt failed; will retry", "err", o.Error, "next_attempt", next)
		case e.Permanent:
			o.State, outcome = store.StateDead, "dead"
			o.DeadReason = "permanent failure: " + o.Error
			log().Error("delivery failed permanently", "err", o.Error)
		default:
			o.State, outcome = store.StateDead, "dead"
			o.DeadReason = fmt.Sprintf("gave up after %d attempts over %s: %s", del.Attempts+1, d.cfg.Now().Sub(lifeStart).Round(time.Second), o.Error)
			log().Error("delivery lifetime over", "err", o.Error)
		}
		o.Attempt.Outcome = outcome
	}
	// Record even when ctx ended: the attempt happened. The outcome rides
	// in the store's next group commit. The worker waits for it, so that a
	// kill repeats at most Workers sends (in flight or not yet recorded).
	// A commit that failed for everyone in it (a full disk) is tried
	// again a few times before the outcome is given up: the job would
	// otherwise wait for its lease to end and be sent once more.
	rctx := context.WithoutCancel(ctx)
	rec, rerr := d.db.Record(rctx, del.ID, del.LeaseUntil, o)
	for try := 1; rerr != nil && !errors.Is(rerr, store.ErrLeaseLost) && try < 4; try++ {
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
		rec, rerr = d.db.Record(rctx, del.ID, del.LeaseUntil, o)
	}
	if rerr != nil {
		if errors.Is(rerr, store.ErrLeaseLost) {
			log().Warn("lease lost before the outcome was recorded; the job was claimed again", "outcome", outcome)
		} else {
			log().Error("record attempt", "err", rerr)
		}
		return
	}
	if d.obs != nil {
		d.obs.Attempted(del.Channel, outcome, took)
		if outcome == "sent" {
			d.obs.Delivered(del.Channel, rec.SentAt.Sub(del.CreatedAt))
		}
	}
	if outcome == "retry" {
		d.Notify()
	}
}

// envelope returns the decoded envelope id, from the cache, from rec (its
// record, read with the job's claim) or from the store. It is shared:
// whoever changes it must copy it first.
func (d *Dispatcher) envelope(ctx context.Context, id string, rec *store.EnvelopeRecord) (*envelope.Envelope, error) {
	if env, ok := d.cfg.Envelopes.Get(id); ok {
		return env, nil
	}
	if rec == nil || rec.ID != id {
		var err error
		if rec, err = d.db.Envelope(ctx, id); err != nil {
			return nil, Temporary(fmt.Errorf("load envelope %s: %w", id, err))
		}
	}
	env := new(envelope.Envelope)
	if err := envelope.UnmarshalStored(rec.Envelope, env); err != nil {
		return nil, Permanent(fmt.Errorf("stored envelope %s is unreadable: %w", id, err))
	}
	// Taken already: kept for the envelope's other deliveries while no
	// envelope yet to be taken needs the room.
	d.cfg.Envelopes.KeepUsed(id, env, len(rec.Envelope))
	return env, nil
}

// prefetch reads, in one store call, the envelopes of claimed jobs that
// the cache does not hold, so that workers do not each open a read of their
// own: with a backlog larger than the cache, those reads (one transaction
// or query per job) were where the workers queued for the store. The
// records come back in the order of claimed, nil where the cache held the
// envelope or the read failed (the worker then reads it itself). Workers
// decode them.
func (d *Dispatcher) prefetch(ctx context.Context, claimed []*store.Delivery) []*store.EnvelopeRecord {
	recs := make([]*store.EnvelopeRecord, len(claimed))
	var ids []string
	var at []int
	seen := make(map[string]int)
	for i, del := range claimed {
		if d.cfg.Envelopes.Has(del.EnvelopeID) {
			continue
		}
		if _, ok := seen[del.EnvelopeID]; !ok {
			seen[del.EnvelopeID] = len(ids)
			ids = append(ids, del.EnvelopeID)
		}
		at = append(at, i)
	}
	if len(ids) == 0 {
		return recs
	}
	got, err := d.db.Envelopes(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("read the claimed jobs' envelopes; each job reads its own", "err", err)
		}
		return recs
	}
	for _, i := range at {
		recs[i] = got[seen[claimed[i].EnvelopeID]]
	}
	return recs
}

func (d *Dispatcher) attempt(ctx context.Context, deliverer Deliverer, del *store.Delivery, rec *store.EnvelopeRecord, policy Policy) (res *Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("deliverer panicked", "delivery_id", del.ID, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, Temporary(fmt.Errorf("deliverer panicked: %v", p))
		}
	}()
	env, err := d.envelope(ctx, del.EnvelopeID, rec)
	if err != nil {
		return nil, err
	}
	job := &Job{Delivery: del, Envelope: env, Attempt: del.Attempts + 1}
	if d.handles != nil && len(del.ApprovalIDs) > 0 {
		h, err := d.handles.Handles(ctx, del, env)
		if err != nil {
			return nil, Temporary(fmt.Errorf("approval handles: %w", err))
		}
		job.Approvals = h
	}
	// A send in flight when the dispatcher stops gets a grace period to
	// finish: cutting it off would leave a maybe-sent message to repeat.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), policy.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(d.cfg.ShutdownGrace, cancel)
		context.AfterFunc(actx, func() { t.Stop() })
	})
	defer stop()
	return deliverer.Deliver(actx, job)
}
