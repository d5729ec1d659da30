package fakeclock

import (
	"context"
	"testing"
	"time"
)

func TestStandingClock(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := New(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	c.Advance(time.Minute)
	if got := c.Now(); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after Advance: %v", got)
	}
	c.Set(t0)
	c.Step(time.Second)
	a, b := c.Now(), c.Now()
	if !a.Equal(t0) || !b.Equal(t0.Add(time.Second)) {
		t.Fatalf("stepped readings %v, %v", a, b)
	}
	c.Step(0)
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Sleep(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := c.Now(); !got.Equal(t0.Add(2*time.Second + time.Hour)) {
		t.Fatalf("after Sleep: %v", got)
	}
	cancel()
	if err := c.Sleep(ctx, time.Second); err == nil {
		t.Fatal("Sleep on a cancelled context returned nil")
	}
}

func TestOffsetClock(t *testing.T) {
	c := NewOffset()
	if d := time.Since(c.Now()); d < -time.Second || d > time.Second {
		t.Fatalf("offset clock is %v from real time", d)
	}
	c.Advance(24 * time.Hour)
	if d := time.Until(c.Now()); d < 23*time.Hour || d > 25*time.Hour {
		t.Fatalf("after a day's Advance it is %v ahead", d)
	}
	target := time.Now().Add(-time.Hour)
	c.Set(target)
	if d := c.Now().Sub(target); d < 0 || d > time.Second {
		t.Fatalf("after Set it is %v from the target", d)
	}
}
