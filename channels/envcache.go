package channels

import (
	"sync"

	"github.com/cool-ai/beachd/envelope"
)

// EnvelopeCache keeps recently accepted envelopes decoded, so that the
// dispatcher does not read and decode again, per delivery, what ingest
// has just decoded. It holds at most MaxBytes of envelope bodies (as
// accepted) and forgets the oldest first. A miss costs a store read.
//
// Envelopes are immutable once accepted: channels, filters and renderers
// read a shared *envelope.Envelope and copy what they change
// (Registry.Filter builds a new part list, sharing each part's metadata
// map and data; render.Webhook copies a part's metadata before adding to
// it). render's TestRenderingLeavesSharedEnvelope runs every channel on one
// envelope at once under -race. Safe for concurrent use.
type EnvelopeCache struct {
	mu      sync.Mutex
	max     int
	bytes   int
	entries map[string]cacheEntry
	order   []string // FIFO of ids; order[head:] are live or stale
	head    int
}

type cacheEntry struct {
	env  *envelope.Envelope
	size int
}

// NewEnvelopeCache returns a cache holding at most maxBytes of envelope
// bodies; maxBytes ≤ 0 means 16 MiB.
func NewEnvelopeCache(maxBytes int) *EnvelopeCache {
	if maxBytes <= 0 {
		maxBytes = 16 << 20
	}
	return &EnvelopeCache{max: maxBytes, entries: map[string]cacheEntry{}}
}

// Put remembers env, whose accepted body is size bytes, under id. An
// envelope larger than the whole cache is not kept.
func (c *EnvelopeCache) Put(id string, env *envelope.Envelope, size int) {
	if c == nil || env == nil || size > c.max {
		return
	}
	size = max(size, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[id]; ok {
		return
	}
	for c.bytes+size > c.max && c.head < len(c.order) {
		old := c.order[c.head]
		c.order[c.head] = ""
		c.head++
		c.bytes -= c.entries[old].size
		delete(c.entries, old)
	}
	if c.head > 1024 && c.head > len(c.order)/2 {
		c.order = append([]string(nil), c.order[c.head:]...)
		c.head = 0
	}
	c.entries[id] = cacheEntry{env: env, size: size}
	c.order = append(c.order, id)
	c.bytes += size
}

// Get returns the envelope remembered under id, if any.
func (c *EnvelopeCache) Get(id string) (*envelope.Envelope, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	return e.env, ok
}

// Len is the number of envelopes held.
func (c *EnvelopeCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
