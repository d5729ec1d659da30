package channels

import (
	"sync"
	"time"

	"github.com/cool-ai/beachd/store"
)

// A hand-off gives a fresh delivery to a dispatch worker without a claim:
// ingest reserves a place in the dispatcher's buffer (and the channel's
// admission) before it stores the envelope, stores the delivery already
// leased to this process (store.NewDelivery.LeaseUntil), and hands the
// stored job over once the commit is durable. That saves the claim's
// share of a commit and the wait for the claim loop. Durability is as for
// a claimed job: the lease is on disk before the send starts, and a crash
// re-queues it at start-up (maybe sent).

// IDFreeAdmitter is an Admitter whose Admit and Done look only at a job's
// Channel and To, never its ID, so that a job can be admitted before the
// store has given it an id. Only such channels (and channels without an
// Admitter) take hand-offs.
type IDFreeAdmitter interface {
	Admitter
	AdmitsWithoutID()
}

// Reservation is a place in the dispatcher's buffer, and the channel's
// admission, held for one delivery being ingested. Until is the lease to
// store it with.
type Reservation struct {
	Until time.Time
	probe store.Delivery
	admit Admitter
}

// Reserve holds a place for a delivery to channel and recipient to, if a
// worker can take it at once: no job is waiting to be claimed (a fresh
// delivery must not overtake due ones), the buffer has room, hand-offs
// hold at most half of it, and the channel admits it now. Give the place
// back with Unreserve, or fill it with Hand.
func (d *Dispatcher) Reserve(channel, to string) (*Reservation, bool) {
	deliverer, ok := d.deliverers[channel]
	if !ok || !d.drained() {
		return nil, false
	}
	a, admits := deliverer.(Admitter)
	if _, idFree := a.(IDFreeAdmitter); admits && !idFree {
		return nil, false
	}
	if !d.buf.reserve(d.cfg.Workers / 2) {
		return nil, false
	}
	r := &Reservation{Until: d.cfg.Now().Add(d.lease), probe: store.Delivery{Channel: channel, To: to}}
	if admits {
		if !a.Admit(&r.probe) {
			d.buf.unreserve()
			return nil, false
		}
		r.admit = a
	}
	return r, true
}

// Unreserve gives back a place Reserve held (the ingest failed, was a
// replay, or did not hand the delivery off).
func (d *Dispatcher) Unreserve(r *Reservation) {
	if r == nil {
		return
	}
	if r.admit != nil {
		r.admit.Done(&r.probe)
	}
	d.buf.unreserve()
}

// Hand gives a worker the delivery stored for r: del must be what the
// store answered, in state sending with r's lease. If the dispatcher has
// stopped meanwhile, the job is released to the queue instead.
func (d *Dispatcher) Hand(r *Reservation, del *store.Delivery) {
	if del.State != store.StateSending || !del.LeaseUntil.Equal(r.Until) || del.Channel != r.probe.Channel || del.To != r.probe.To {
		// Not what was reserved (a store that ignored the lease): the job
		// is queued or leased as stored; give the place back.
		d.Unreserve(r)
		d.Notify()
		return
	}
	if !d.buf.hand(job{del: del, handed: true}) {
		d.release(del) // admission given back, lease ended
	}
}

// job is one delivery in the dispatcher's buffer; handed: it came from
// Hand, not from a claim.
type job struct {
	del    *store.Delivery
	rec    *store.EnvelopeRecord // its envelope's record, when read with the claim
	handed bool
}

// buffer is the dispatcher's job buffer and the count of its places in
// use: jobs in it, places reserved for hand-offs, and places a claim in
// progress has taken. Sends to it never block, since every job has its
// place before it is sent.
type buffer struct {
	mu      sync.Mutex
	jobs    chan job
	size    int
	used    int
	handed  int // reserved or handed off, not yet taken by a worker
	running bool
}

// open makes the buffer of size places and starts taking hand-offs.
func (b *buffer) open(size int) <-chan job {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.jobs, b.size, b.used, b.handed, b.running = make(chan job, size), size, 0, 0, true
	return b.jobs
}

// close stops taking jobs; the workers drain what is buffered.
func (b *buffer) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running = false
	close(b.jobs)
}

// room is the number of free places and of places in use.
func (b *buffer) room() (free, used int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size - b.used, b.used
}

// take takes up to n free places for a claim and says how many it took.
func (b *buffer) take(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = max(0, min(n, b.size-b.used))
	b.used += n
	return n
}

// give gives back n places a claim took and did not fill.
func (b *buffer) give(n int) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// put sends a claimed job into a place taken for it.
func (b *buffer) put(j job) { b.jobs <- j }

// taken frees the place of a job a worker took.
func (b *buffer) taken(handed bool) {
	b.mu.Lock()
	b.used--
	if handed {
		b.handed--
	}
	b.mu.Unlock()
}

// reserve takes a place for a hand-off while hand-offs hold fewer than
// limit places.
func (b *buffer) reserve(limit int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running || b.used >= b.size || b.handed >= max(1, limit) {
		return false
	}
	b.used++
	b.handed++
	return true
}

func (b *buffer) unreserve() {
	b.mu.Lock()
	b.used--
	b.handed--
	b.mu.Unlock()
}

// hand sends a handed-off job into its reserved place; false when the
// buffer has closed (the place is given back).
func (b *buffer) hand(j job) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		b.used--
		b.handed--
		return false
	}
	b.jobs <- j
	return true
}
