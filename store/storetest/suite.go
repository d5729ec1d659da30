package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
)

// Backend opens a fresh, empty store for one test, whose clock is now. It
// closes the store when the test ends (t.Cleanup).
type Backend func(t testing.TB, now func() time.Time) store.Store

// Run runs the conformance suite against a backend, each case as a
// subtest. Every case uses the store.Store interface only, moves time with
// the clock it hands the backend (never with sleeps), and ends with
// CheckInvariants. Times stay whole microseconds, which every backend
// stores exactly.
func Run(t *testing.T, open Backend) {
	for _, c := range slices.Concat(deliveryCases, claimCases, providerCases, approvalCases, eventCases, injectionCases,
		scheduleCases, conversationCases, limitCases, turnCases, queryCases, recordCases, leaseCases, concurrencyCases, handOffCases,
		policyCases, timerCases) {
		t.Run(c.name, func(t *testing.T) {
			clock := fakeclock.New(start)
			s := open(t, clock.Now)
			t.Cleanup(func() {
				if err := s.CheckInvariants(); err != nil {
					t.Errorf("invariants after %q: %v", c.name, err)
				}
			})
			c.run(&env{t: t, s: s, clock: clock, ctx: t.Context()})
		})
	}
}

// start is every case's starting time.
var start = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// testCase is one case of the suite.
type testCase struct {
	name string
	run  func(e *env)
}

// env is what a case works with: the store under test and its clock.
type env struct {
	t     *testing.T
	s     store.Store
	clock *fakeclock.Clock
	ctx   context.Context
}

// now is the store's current time.
func (e *env) now() time.Time { return e.clock.Now() }

// advance moves the store's clock on by d.
func (e *env) advance(d time.Duration) { e.clock.Advance(d) }

// ok fails the case at once when err is not nil.
func (e *env) ok(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// is fails the case at once when err does not match want.
func (e *env) is(err, want error, what string) {
	e.t.Helper()
	if !errors.Is(err, want) {
		e.t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

// sameTime fails the case at once when got is not want.
func (e *env) sameTime(got, want time.Time, what string) {
	e.t.Helper()
	if !got.Equal(want) {
		e.t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// to is a delivery to recipient on channel.
func to(channel, recipient string) store.NewDelivery {
	return store.NewDelivery{Channel: channel, To: recipient}
}

// hooks are n webhook deliveries to the endpoints ep0…ep(n-1).
func hooks(n int) []store.NewDelivery {
	var out []store.NewDelivery
	for i := range n {
		out = append(out, to("webhook", fmt.Sprintf("ep%d", i)))
	}
	return out
}

// ingest stores one envelope with the deliveries ds.
func (e *env) ingest(ds ...store.NewDelivery) *store.IngestResult {
	e.t.Helper()
	res, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{"role":"agent"}`), Agent: "travel", Deliveries: ds})
	e.ok(err, "ingest")
	if len(res.Deliveries) != len(ds) {
		e.t.Fatalf("ingest stored %d deliveries, want %d", len(res.Deliveries), len(ds))
	}
	return res
}

// ingestSpaced stores one envelope per delivery, a millisecond apart so
// that they fall due in that order, and returns the delivery ids.
func (e *env) ingestSpaced(ds ...store.NewDelivery) []string {
	e.t.Helper()
	var out []string
	for _, d := range ds {
		out = append(out, e.ingest(d).Deliveries[0].ID)
		e.advance(time.Millisecond)
	}
	return out
}

// claim claims up to max due jobs with a one-minute lease.
func (e *env) claim(max int) []*store.Delivery {
	e.t.Helper()
	got, err := e.s.Claim(e.ctx, max, time.Minute, nil)
	e.ok(err, "claim")
	return got
}

// claimIDs claims like claim and returns the ids.
func (e *env) claimIDs(max int) []string {
	e.t.Helper()
	return ids(e.claim(max))
}

// record records outcome o of the claimed job d.
func (e *env) record(d *store.Delivery, o store.Outcome) *store.Delivery {
	e.t.Helper()
	out, err := e.s.Record(e.ctx, d.ID, d.LeaseUntil, o)
	e.ok(err, "record "+string(o.State))
	return out
}

// delivery reads one delivery.
func (e *env) delivery(id string) *store.Delivery {
	e.t.Helper()
	d, err := e.s.Delivery(e.ctx, id)
	e.ok(err, "read delivery "+id)
	return d
}

// noneDue fails the case when a job can be claimed.
func (e *env) noneDue(why string) {
	e.t.Helper()
	if got := e.claimIDs(100); len(got) != 0 {
		e.t.Fatalf("%s: claimed %v", why, got)
	}
}

// sameJSON reports whether a and b are the same JSON value (a backend may
// store JSON in a normal form of its own).
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// ids are the deliveries' ids in order.
func ids(ds []*store.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// parallel runs f(i) for i in 0…n-1 at once, each in its own goroutine,
// started together, and returns their errors by i.
func parallel(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var ready, done sync.WaitGroup
	ready.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Wait()
			errs[i] = f(i)
		}()
	}
	ready.Done()
	done.Wait()
	return errs
}

// count is how many of errs match want (nil counts successes).
func count(errs []error, want error) int {
	n := 0
	for _, err := range errs {
		if (want == nil && err == nil) || (want != nil && errors.Is(err, want)) {
			n++
		}
	}
	return n
}
