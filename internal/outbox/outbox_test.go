package outbox

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The loop runs every due job once, never more than Workers at a time,
// takes handed-over jobs, reports a failed claim and goes on, and waits
// for the attempts in flight when ctx ends.
func TestLoop(t *testing.T) {
	var mu sync.Mutex
	queue := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	failOnce := true
	var inFlight, most, done atomic.Int32
	seen := map[int]int{}
	wake := make(chan struct{}, 1)
	handoff := make(chan int, 1)
	var claimErrs atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	l := Loop[int]{
		Workers: 3,
		Claim: func(ctx context.Context, n int) ([]int, error) {
			mu.Lock()
			defer mu.Unlock()
			if failOnce {
				failOnce = false
				return nil, errors.New("store busy")
			}
			k := min(n, len(queue))
			jobs := append([]int(nil), queue[:k]...)
			queue = queue[k:]
			return jobs, nil
		},
		Attempt: func(ctx context.Context, job int) {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			seen[job]++
			mu.Unlock()
			inFlight.Add(-1)
			done.Add(1)
		},
		Next: func() (time.Time, bool) { return time.Time{}, false },
		Now:  time.Now,
		Wake: wake,
		Poke: func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		},
		Handoff:     handoff,
		ClaimFailed: func(error) { claimErrs.Add(1) },
		MaxWait:     10 * time.Millisecond,
	}
	ended := make(chan error, 1)
	go func() { ended <- l.Run(ctx) }()
	handoff <- 11
	deadline := time.Now().Add(10 * time.Second)
	for done.Load() < 11 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 11 jobs done", done.Load())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	for job := 1; job <= 11; job++ {
		if seen[job] != 1 {
			t.Errorf("job %d attempted %d times", job, seen[job])
		}
	}
	if most.Load() > 3 {
		t.Errorf("%d attempts at once, Workers is 3", most.Load())
	}
	if claimErrs.Load() != 1 {
		t.Errorf("%d claim failures reported, want 1", claimErrs.Load())
	}
}

// Requeue runs before the first claim, then at most every RequeueEvery.
func TestLoopRequeuesPeriodically(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	var requeues, claims atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	l := Loop[int]{
		Workers: 1,
		Claim: func(ctx context.Context, n int) ([]int, error) {
			if requeues.Load() == 0 {
				t.Error("claimed before the first requeue")
			}
			claims.Add(1)
			return nil, nil
		},
		Attempt:      func(context.Context, int) {},
		Next:         func() (time.Time, bool) { return time.Time{}, false },
		Now:          clock,
		Requeue:      func(context.Context) { requeues.Add(1) },
		RequeueEvery: 10 * time.Second,
		MaxWait:      time.Millisecond,
	}
	ended := make(chan error, 1)
	go func() { ended <- l.Run(ctx) }()
	// waitClaims waits for n more looks.
	waitClaims := func(n int32) {
		t.Helper()
		want := claims.Load() + n
		for end := time.Now().Add(5 * time.Second); claims.Load() < want; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the loop stopped looking")
			}
		}
	}
	waitClaims(3)
	if n := requeues.Load(); n != 1 {
		t.Fatalf("%d requeues at start, want 1", n)
	}
	advance(9 * time.Second)
	waitClaims(3)
	if n := requeues.Load(); n != 1 {
		t.Fatalf("%d requeues after 9 s, want 1", n)
	}
	advance(time.Second)
	waitClaims(3)
	if n := requeues.Load(); n != 2 {
		t.Fatalf("%d requeues after 10 s, want 2", n)
	}
	cancel()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
}
