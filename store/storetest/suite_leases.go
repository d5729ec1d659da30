package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/cool-ai/beachd/store"
)

// leaseCases are the singletons' leases.
var leaseCases = []testCase{
	{"lease/first take, renewal, refusal, takeover after expiry fences the old holder", leaseLifecycle},
	{"lease/release lets another take at once; a stale release is ignored; every lease listed", leaseRelease},
}

// acquire asks for lease name for holder at gen with a one-minute ttl.
func (e *env) acquire(name, holder string, gen uint64) (store.Lease, bool) {
	e.t.Helper()
	l, ok, err := e.s.AcquireLease(e.ctx, name, holder, gen, time.Minute)
	e.ok(err, fmt.Sprintf("acquire %s for %s at %d", name, holder, gen))
	return l, ok
}

func leaseLifecycle(e *env) {
	a, ok := e.acquire("scheduler", "A", 0)
	if !ok || a.Holder != "A" || a.Generation != 1 || a.Name != "scheduler" {
		e.t.Fatalf("first take %+v, %v; want A at generation 1", a, ok)
	}
	e.sameTime(a.Until, start.Add(time.Minute), "first lease until")
	if _, ok := e.acquire("scheduler", "B", 0); ok {
		e.t.Fatal("B took a lease A holds")
	}
	e.advance(30 * time.Second)
	renewed, ok := e.acquire("scheduler", "A", a.Generation)
	if !ok || renewed.Generation != 1 {
		e.t.Fatalf("renewal %+v, %v; want generation 1 kept", renewed, ok)
	}
	e.sameTime(renewed.Until, e.now().Add(time.Minute), "renewed until")
	e.advance(59 * time.Second)
	if _, ok := e.acquire("scheduler", "B", 0); ok {
		e.t.Fatal("B took the lease before the renewed one ran out")
	}
	e.advance(2 * time.Second)
	b, ok := e.acquire("scheduler", "B", 0)
	if !ok || b.Holder != "B" || b.Generation != 2 {
		e.t.Fatalf("takeover %+v, %v; want B at generation 2", b, ok)
	}
	if _, ok := e.acquire("scheduler", "A", a.Generation); ok {
		e.t.Fatal("A renewed at its old generation after B took over")
	}
	if again, ok := e.acquire("scheduler", "B", b.Generation); !ok || again.Generation != 2 {
		e.t.Fatalf("B's renewal %+v, %v", again, ok)
	}
}

func leaseRelease(e *env) {
	a, _ := e.acquire("retention", "A", 0)
	e.acquire("sweeper", "A", 0)
	e.ok(e.s.ReleaseLease(e.ctx, "retention", "B", a.Generation), "release by another holder")
	e.ok(e.s.ReleaseLease(e.ctx, "retention", "A", a.Generation+1), "release at another generation")
	if _, ok := e.acquire("retention", "B", 0); ok {
		e.t.Fatal("a stale release let B take the lease")
	}
	e.ok(e.s.ReleaseLease(e.ctx, "retention", "A", a.Generation), "release")
	b, ok := e.acquire("retention", "B", 0)
	if !ok || b.Generation != a.Generation+1 {
		e.t.Fatalf("take after release %+v, %v; want the next generation", b, ok)
	}
	e.ok(e.s.ReleaseLease(e.ctx, "never-taken", "A", 1), "release of a lease never taken")
	leases, err := e.s.ListLeases(e.ctx)
	e.ok(err, "list leases")
	byName := map[string]store.Lease{}
	var names []string
	for _, l := range leases {
		byName[l.Name] = l
		names = append(names, l.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"retention", "sweeper"}) || byName["retention"].Holder != "B" || byName["sweeper"].Holder != "A" {
		e.t.Fatalf("leases %+v", leases)
	}
}
