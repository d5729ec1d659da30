package postgres

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// committerRig runs a committer of ints with groups of at most 3 and a wait
// for company of a minute: only a group as large as the one before ends it.
// Each commit is held until the test lets it go (release), and each group is
// reported on groups.
type committerRig struct {
	in       chan int
	groups   chan []int
	release  chan struct{}
	busyAsks chan struct{}
	closing  chan struct{}
	wg       sync.WaitGroup
}

func newCommitterRig(t *testing.T, busy bool) *committerRig {
	r := &committerRig{in: make(chan int, 2), groups: make(chan []int, 10), release: make(chan struct{}),
		busyAsks: make(chan struct{}, 10), closing: make(chan struct{})}
	r.wg.Add(1)
	go committer(&r.wg, r.closing, r.in, 3, func() bool { r.busyAsks <- struct{}{}; return busy }, time.Minute,
		func(g []int) { r.groups <- slices.Clone(g); <-r.release }, func(int) {})
	t.Cleanup(func() { close(r.closing); close(r.release); r.wg.Wait() })
	return r
}

// group waits for the next group's commit and lets it end.
func (r *committerRig) group(t *testing.T) []int {
	t.Helper()
	select {
	case g := <-r.groups:
		r.release <- struct{}{}
		return g
	case <-time.After(20 * time.Second):
		t.Fatal("no group committed")
		return nil
	}
}

// busyCommit brings the committer to a group of two, as under load: a
// first request commits alone while two more queue behind it, and they
// commit together.
func (r *committerRig) busyCommit(t *testing.T) {
	t.Helper()
	r.in <- 1
	g1 := <-r.groups // held: the next two queue (in holds two)
	r.in <- 2
	r.in <- 3
	r.release <- struct{}{}
	if !slices.Equal(g1, []int{1}) {
		t.Fatalf("first group %v", g1)
	}
	if g := r.group(t); !slices.Equal(g, []int{2, 3}) {
		t.Fatalf("second group %v, want [2 3]", g)
	}
}

// Under load (the previous group held two or more) and with the processors
// saturated, a group waits for company until it is as large as the previous
// one (the wait here is a minute).
func TestCommitterWaitsForCompanyUnderLoad(t *testing.T) {
	r := newCommitterRig(t, true)
	r.busyCommit(t)
	for len(r.busyAsks) > 0 {
		<-r.busyAsks
	}
	r.in <- 4
	select {
	case <-r.busyAsks:
	case g := <-r.groups:
		t.Fatalf("group %v committed without waiting for company", g)
	case <-time.After(20 * time.Second):
		t.Fatal("the committer never asked whether the processors are busy")
	}
	r.in <- 5
	if g := r.group(t); !slices.Equal(g, []int{4, 5}) {
		t.Fatalf("group %v, want [4 5]", g)
	}
}

// With processors to spare, the same group commits at once.
func TestCommitterDoesNotWaitWithProcessorsToSpare(t *testing.T) {
	r := newCommitterRig(t, false)
	r.busyCommit(t)
	r.in <- 4
	if g := r.group(t); !slices.Equal(g, []int{4}) {
		t.Fatalf("group %v, want [4]", g)
	}
}

// A request that comes after the committer sat idle commits at once, even
// after a busy group on saturated processors: a lone caller never waits.
func TestCommitterLoneCallerNeverWaits(t *testing.T) {
	r := newCommitterRig(t, true)
	r.busyCommit(t)
	time.Sleep(lingerIdle + lingerIdle/2) // idle
	for len(r.busyAsks) > 0 {
		<-r.busyAsks
	}
	r.in <- 4
	if g := r.group(t); !slices.Equal(g, []int{4}) {
		t.Fatalf("group %v, want [4]", g)
	}
	if len(r.busyAsks) != 0 {
		t.Fatal("asked about the processors for a lone caller")
	}
}
