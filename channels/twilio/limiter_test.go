package twilio

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
)

// TestBurstOf100IsPacedNotRejected sends 100 envelopes to one number
// through the SMS deliverer with a 1/s limit and a burst of 3: every one is
// sent, the first three at once and the rest exactly one second apart.
func TestBurstOf100IsPacedNotRejected(t *testing.T) {
	f := newFakeTwilio(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := fakeclock.New(t0) // advances only when someone sleeps on it
	lim := NewLimiter(LimiterConfig{PerSecond: 1, Burst: 3, Now: clock.Now, Sleep: clock.Sleep})
	d, err := NewSMS(testConfig(), Deps{Client: newTestClient(t, f.URL, 5*time.Second), Store: openStore(t), Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	var sentAt []time.Time
	for i := 0; i < 100; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := d.Deliver(ctx, job(fmt.Sprintf("dlv_%03d", i), "sms", alice, fmt.Sprintf("message %d", i)))
		cancel()
		if err != nil {
			t.Fatalf("envelope %d rejected: %v", i, err)
		}
		sentAt = append(sentAt, clock.Now())
	}
	if n := f.Posts(); n != 100 {
		t.Fatalf("posts = %d, want 100", n)
	}
	for i, at := range sentAt {
		want := t0
		if i >= 3 {
			want = t0.Add(time.Duration(i-2) * time.Second)
		}
		if !at.Equal(want) {
			t.Errorf("message %d sent at +%v, want +%v", i, at.Sub(t0), want.Sub(t0))
		}
	}
}

// TestConcurrentReservationsGetDistinctSlots: 100 concurrent senders on one
// bucket each get their own slot, one second apart.
func TestConcurrentReservationsGetDistinctSlots(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	lim := NewLimiter(LimiterConfig{PerSecond: 1, Burst: 1, Now: clock.Now, Sleep: clock.Sleep})
	var mu sync.Mutex
	var waits []time.Duration
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, ok := lim.reserve(ourSMS, time.Hour)
			if !ok {
				t.Error("refused")
			}
			mu.Lock()
			waits = append(waits, w)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(waits)
	for i, w := range waits {
		if w != time.Duration(i)*time.Second {
			t.Fatalf("slot %d waits %v, want %v", i, w, time.Duration(i)*time.Second)
		}
	}
	// Another sender has its own bucket.
	if w, _ := lim.reserve(ourWA, time.Hour); w != 0 {
		t.Errorf("other sender waits %v", w)
	}
}

// TestWaitBeyondTheAttemptBecomesRetryAfter: when the next slot is later
// than the attempt's deadline allows, the attempt ends at once with a
// RetryAfter (temporary), sends nothing, and keeps no slot.
func TestWaitBeyondTheAttemptBecomesRetryAfter(t *testing.T) {
	f := newFakeTwilio(t)
	clock := fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	// Sleep does not move this clock: every reservation adds a second of
	// debt, as if all were made at the same instant.
	lim := NewLimiter(LimiterConfig{PerSecond: 1, Burst: 1, Now: clock.Now, Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }})
	cfg := testConfig()
	cfg.CallReserve = 5 * time.Second
	d, err := NewSMS(cfg, Deps{Client: newTestClient(t, f.URL, 5*time.Second), Store: openStore(t), Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	// Deadline 10s, 5s kept for the call: waits of 0–4s fit, 5s does not.
	for i := 0; i < 7; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := d.Deliver(ctx, job(fmt.Sprintf("dlv_%d", i), "sms", alice, "hi"))
		cancel()
		if i < 5 {
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			continue
		}
		e := channels.AsError(err)
		if err == nil || e.Permanent || e.RetryAfter != 5*time.Second {
			t.Fatalf("send %d: err=%v retryAfter=%v", i, err, e.RetryAfter)
		}
	}
	if n := f.Posts(); n != 5 {
		t.Errorf("posts = %d, want 5", n)
	}
}
