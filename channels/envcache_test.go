package channels

import (
	"context"
	"fmt"
	"testing"

	"github.com/cool-ai/beachd/envelope"
)

func TestEnvelopeCacheBoundsBytes(t *testing.T) {
	c := NewEnvelopeCache(1000)
	envs := map[string]*envelope.Envelope{}
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("env_%02d", i)
		envs[id] = &envelope.Envelope{Role: id}
		c.Put(id, envs[id], 100)
		if c.bytes > 1000 {
			t.Fatalf("after %d puts the cache holds %d bytes, bound 1000", i+1, c.bytes)
		}
	}
	if c.Len() != 10 {
		t.Fatalf("holds %d envelopes, want the newest 10", c.Len())
	}
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("env_%02d", i)
		got, ok := c.Get(id)
		if want := i >= 40; ok != want || (ok && got != envs[id]) {
			t.Fatalf("%s: cached %v, want %v", id, ok, want)
		}
	}
	c.Put("huge", &envelope.Envelope{}, 1001)
	if _, ok := c.Get("huge"); ok {
		t.Fatal("an envelope larger than the cache was kept")
	}
	var nilCache *EnvelopeCache
	nilCache.Put("x", &envelope.Envelope{}, 1)
	if _, ok := nilCache.Get("x"); ok {
		t.Fatal("a nil cache answered")
	}
	// The id ring is compacted and stays proportional to the entries.
	for i := 0; i < 10000; i++ {
		c.Put(fmt.Sprintf("more_%d", i), &envelope.Envelope{}, 100)
	}
	if len(c.order)-c.head != 10 || len(c.order) > 2100 {
		t.Fatalf("ring: %d live of %d slots", len(c.order)-c.head, len(c.order))
	}
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
	env, err := d.envelope(context.Background(), del.EnvelopeID)
	if err != nil || env.Role != "agent" {
		t.Fatalf("store read: %+v %v", env, err)
	}
	if again, ok := d.cfg.Envelopes.Get(del.EnvelopeID); !ok || again != env {
		t.Fatal("an envelope read from the store was not kept")
	}
}
