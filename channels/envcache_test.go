package channels

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

func TestEnvelopeCacheBoundsBytes(t *testing.T) {
	c := NewEnvelopeCache(1000)
	now := time.Unix(1e9, 0)
	c.now = func() time.Time { return now }
	envs := map[string]*envelope.Envelope{}
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("env_%02d", i)
		envs[id] = &envelope.Envelope{Role: id}
		c.Put(id, envs[id], 100)
		if c.heldBytes() > 1000 {
			t.Fatalf("after %d puts the cache holds %d bytes, bound 1000", i+1, c.heldBytes())
		}
	}
	// A backlog larger than the cache: the oldest ten, which the dispatcher
	// takes first, stay; the newer are not kept.
	if c.Len() != 10 {
		t.Fatalf("holds %d envelopes, want 10", c.Len())
	}
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("env_%02d", i)
		got, ok := c.Get(id)
		if want := i < 10; ok != want || (ok && got != envs[id]) {
			t.Fatalf("%s: cached %v, want %v", id, ok, want)
		}
	}
	// Taken envelopes give their room to new ones, the first taken first.
	for i := 50; i < 55; i++ {
		c.Put(fmt.Sprintf("env_%02d", i), &envelope.Envelope{}, 100)
	}
	for i := 0; i < 55; i++ {
		id := fmt.Sprintf("env_%02d", i)
		want := (i >= 5 && i < 10) || i >= 50
		if _, ok := c.Get(id); ok != want {
			t.Fatalf("after five new ones, %s: cached %v, want %v", id, ok, want)
		}
	}
	c.Put("huge", &envelope.Envelope{}, 1001)
	if _, ok := c.Get("huge"); ok {
		t.Fatal("an envelope larger than the cache was kept")
	}
	var nilCache *EnvelopeCache
	nilCache.Put("x", &envelope.Envelope{}, 1)
	nilCache.KeepUsed("x", &envelope.Envelope{}, 1)
	if _, ok := nilCache.Get("x"); ok {
		t.Fatal("a nil cache answered")
	}
	// The id rings are compacted and stay proportional to the entries.
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("more_%d", i)
		c.Put(id, &envelope.Envelope{}, 100)
		c.Get(id)
	}
	s := &c.shards[0]
	if len(s.entries) != 10 || len(s.order.ids) > 2200 || len(s.used.ids) > 2200 {
		t.Fatalf("rings: %d entries, %d and %d slots", len(s.entries), len(s.order.ids), len(s.used.ids))
	}
}

// An envelope no one takes (its deliveries held for an approval, or
// cancelled) keeps its place for StaleAfter, then gives it to a new one.
func TestEnvelopeCacheStaleGiveWay(t *testing.T) {
	c := NewEnvelopeCache(300)
	now := time.Unix(1e9, 0)
	c.now = func() time.Time { return now }
	for _, id := range []string{"a", "b", "c"} {
		c.Put(id, &envelope.Envelope{}, 100)
	}
	c.Put("d", &envelope.Envelope{}, 100)
	if _, ok := c.Get("d"); ok {
		t.Fatal("a new envelope displaced one not yet taken")
	}
	now = now.Add(StaleAfter)
	c.Put("d", &envelope.Envelope{}, 100)
	if _, ok := c.Get("d"); !ok {
		t.Fatal("an envelope untaken for StaleAfter kept its place")
	}
	if _, ok := c.Get("a"); ok {
		t.Fatal("the oldest untaken envelope was not the one to go")
	}
	// Taken ones (by Get, or read from the store by the dispatcher) go
	// before untaken ones, even stale ones.
	c.KeepUsed("e", &envelope.Envelope{}, 100) // room: "d", taken
	c.Put("f", &envelope.Envelope{}, 100)      // room: "e", taken
	for id, want := range map[string]bool{"b": true, "c": true, "d": false, "e": false, "f": true} {
		if _, ok := c.Get(id); ok != want {
			t.Fatalf("%s: cached %v, want %v", id, ok, want)
		}
	}
}

// Shards: concurrent puts and gets on a sharded cache stay within its
// bound (run with -race).
func TestEnvelopeCacheShardsConcurrent(t *testing.T) {
	c := NewEnvelopeCache(minShardedBytes)
	if len(c.shards) != envShards {
		t.Fatalf("%d shards", len(c.shards))
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				id := fmt.Sprintf("env_%d_%d", w, i)
				c.Put(id, &envelope.Envelope{}, 1000)
				if i%2 == 0 {
					c.Get(id)
				}
			}
		}()
	}
	wg.Wait()
	if got := c.heldBytes(); got > minShardedBytes || got == 0 {
		t.Fatalf("holds %d bytes, bound %d", got, minShardedBytes)
	}
}

func BenchmarkEnvelopeCache(b *testing.B) {
	c := NewEnvelopeCache(4 << 20)
	env := &envelope.Envelope{}
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "env_" + strconv.FormatInt(n.Add(1), 10)
			c.Put(id, env, 800)
			c.Get(id)
		}
	})
}

// The dispatcher takes a job's envelope from the cache when it is there,
// and otherwise reads it from the store and keeps it.
func TestDispatcherUsesEnvelopeCache(t *testing.T) {
	fd := &scripted{}
	db, d, _, id := setup(t, fd, testPolicy)
	d.cfg.Envelopes = NewEnvelopeCache(0)
	del, err := db.Delivery(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	cached := &envelope.Envelope{Role: "cached"}
	d.cfg.Envelopes.Put(del.EnvelopeID, cached, 10)
	step(t, db, d)
	if len(fd.calls) != 1 || fd.calls[0].Envelope != cached {
		t.Fatalf("the deliverer did not get the cached envelope: %+v", fd.calls)
	}
	d.cfg.Envelopes = NewEnvelopeCache(0)
	env, err := d.envelope(context.Background(), del.EnvelopeID, nil)
	if err != nil || env.Role != "agent" {
		t.Fatalf("store read: %+v %v", env, err)
	}
	if again, ok := d.cfg.Envelopes.Get(del.EnvelopeID); !ok || again != env {
		t.Fatal("an envelope read from the store was not kept")
	}
}
