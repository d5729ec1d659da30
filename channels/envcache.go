package channels

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// EnvelopeCache keeps recently accepted envelopes decoded, so that the
// dispatcher does not read and decode again, per delivery, what ingest
// has just decoded. It holds at most MaxBytes of envelope bodies (as
// accepted). A miss costs a store read.
//
// The dispatcher takes jobs in due order, which is mostly the order of
// ingest, so the envelopes it will want next are the oldest ones not yet
// used. Evicting the oldest first (FIFO, LRU) is the worst choice once a
// backlog outgrows the cache: every envelope is evicted just before its
// turn. So room is made first from envelopes the dispatcher has already
// taken (Get, or read from the store by the dispatcher: KeepUsed), oldest
// use first; then from envelopes not taken for StaleAfter (held for an
// approval, cancelled); otherwise a new envelope is not kept, and the older
// ones wait for their turn.
//
// Envelopes are immutable once accepted: channels, filters and renderers
// read a shared *envelope.Envelope and copy what they change
// (Registry.Filter builds a new part list, sharing each part's metadata
// map and data; render.Webhook copies a part's metadata before adding to
// it). render's TestRenderingLeavesSharedEnvelope runs every channel on one
// envelope at once under -race. Safe for concurrent use: the cache is split
// into shards by id, each with its own lock, so that ingest's Put and the
// workers' Get seldom wait for each other.
type EnvelopeCache struct {
	seed   maphash.Seed
	shards []envShard
	now    func() time.Time
	stale  time.Duration
}

// StaleAfter is how long an envelope no one has taken keeps its place
// against newer ones.
const StaleAfter = time.Minute

// envShards is the number of shards of a cache of at least
// minShardedBytes; a smaller one has one.
const (
	envShards       = 8
	minShardedBytes = 1 << 20
)

type envShard struct {
	mu      sync.Mutex
	max     int
	bytes   int
	entries map[string]*cacheEntry
	order   idRing // ids in the order they were kept
	used    idRing // ids in the order they were first taken
	_       [64]byte
}

type cacheEntry struct {
	env  *envelope.Envelope
	size int
	at   time.Time
	used bool
}

// idRing is a FIFO of ids; ids whose entry is gone stay until popped.
type idRing struct {
	ids  []string
	head int
}

func (r *idRing) push(id string) { r.ids = append(r.ids, id) }

func (r *idRing) peek() (string, bool) {
	if r.head == len(r.ids) {
		return "", false
	}
	return r.ids[r.head], true
}

func (r *idRing) pop() {
	r.ids[r.head] = ""
	r.head++
	if r.head > 1024 && r.head > len(r.ids)/2 {
		r.ids = append([]string(nil), r.ids[r.head:]...)
		r.head = 0
	}
}

func (r *idRing) len() int { return len(r.ids) - r.head }

// NewEnvelopeCache returns a cache holding at most maxBytes of envelope
// bodies; maxBytes ≤ 0 means 16 MiB.
func NewEnvelopeCache(maxBytes int) *EnvelopeCache {
	if maxBytes <= 0 {
		maxBytes = 16 << 20
	}
	n := 1
	if maxBytes >= minShardedBytes {
		n = envShards
	}
	c := &EnvelopeCache{seed: maphash.MakeSeed(), shards: make([]envShard, n), now: time.Now, stale: StaleAfter}
	for i := range c.shards {
		c.shards[i].max = maxBytes / n
		c.shards[i].entries = map[string]*cacheEntry{}
	}
	return c
}

func (c *EnvelopeCache) shard(id string) *envShard {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	return &c.shards[maphash.String(c.seed, id)%uint64(len(c.shards))]
}

// Put remembers env, whose accepted body is size bytes, under id: an
// envelope the dispatcher has yet to take. An envelope larger than its
// share of the cache is not kept, nor is one for which no room can be made.
func (c *EnvelopeCache) Put(id string, env *envelope.Envelope, size int) { c.put(id, env, size, false) }

// KeepUsed remembers env as Put does, as an envelope already taken: the
// dispatcher read it from the store for a job, and keeps it for the
// envelope's other deliveries as long as nothing needs the room.
func (c *EnvelopeCache) KeepUsed(id string, env *envelope.Envelope, size int) {
	c.put(id, env, size, true)
}

func (c *EnvelopeCache) put(id string, env *envelope.Envelope, size int, used bool) {
	if c == nil || env == nil {
		return
	}
	size = max(size, 1)
	s := c.shard(id)
	if size > s.max {
		return
	}
	now := c.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[id]; ok {
		return
	}
	// Room from envelopes already taken, oldest use first.
	for s.bytes+size > s.max {
		old, ok := s.used.peek()
		if !ok {
			break
		}
		s.used.pop()
		if e := s.entries[old]; e != nil && e.used {
			s.remove(old, e)
		}
	}
	// Then from envelopes no one took for StaleAfter.
	for s.bytes+size > s.max {
		old, ok := s.order.peek()
		if !ok {
			break
		}
		e := s.entries[old]
		if e != nil && now.Sub(e.at) < c.stale {
			break
		}
		s.order.pop()
		if e != nil {
			s.remove(old, e)
		}
	}
	if s.bytes+size > s.max {
		return // the older envelopes go first
	}
	s.entries[id] = &cacheEntry{env: env, size: size, at: now, used: used}
	s.order.push(id)
	if used {
		s.used.push(id)
	}
	s.bytes += size
	// The rings hold ids of entries removed by the other ring; keep them
	// proportional to the entries.
	if s.order.len() > 4*len(s.entries)+1024 {
		s.order = compactRing(s.order, s.entries, false)
	}
	if s.used.len() > 4*len(s.entries)+1024 {
		s.used = compactRing(s.used, s.entries, true)
	}
}

func (s *envShard) remove(id string, e *cacheEntry) {
	s.bytes -= e.size
	delete(s.entries, id)
}

// compactRing keeps the ids of r that still have an entry (a taken one,
// with onlyUsed).
func compactRing(r idRing, entries map[string]*cacheEntry, onlyUsed bool) idRing {
	var out idRing
	for _, id := range r.ids[r.head:] {
		if e := entries[id]; e != nil && (!onlyUsed || e.used) {
			out.push(id)
		}
	}
	return out
}

// Get returns the envelope remembered under id, if any, and counts it as
// taken.
func (c *EnvelopeCache) Get(id string) (*envelope.Envelope, bool) {
	if c == nil {
		return nil, false
	}
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[id]
	if e == nil {
		return nil, false
	}
	if !e.used {
		e.used = true
		s.used.push(id)
	}
	return e.env, true
}

// Has reports whether an envelope is held under id, without counting it
// as taken.
func (c *EnvelopeCache) Has(id string) bool {
	if c == nil {
		return false
	}
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entries[id] != nil
}

// Len is the number of envelopes held.
func (c *EnvelopeCache) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.entries)
		s.mu.Unlock()
	}
	return n
}

// heldBytes is the size of the envelopes held.
func (c *EnvelopeCache) heldBytes() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.bytes
		s.mu.Unlock()
	}
	return n
}
