package store

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Ids carry their prefix and sort by their time, whatever their random part.
func TestNewIDAtSortsByTime(t *testing.T) {
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	high := bytes.Repeat([]byte{0xff}, 10)
	low := make([]byte, 10)
	a := NewIDAt(at, bytes.NewReader(high), "dlv_")
	b := NewIDAt(at.Add(time.Millisecond), bytes.NewReader(low), "dlv_")
	if !strings.HasPrefix(a, "dlv_") || len(a) != len("dlv_")+26 {
		t.Fatalf("id %q: want dlv_ and 26 characters", a)
	}
	if a >= b {
		t.Fatalf("%q (earlier) does not sort before %q", a, b)
	}
	if c := NewIDAt(at, bytes.NewReader(high), "dlv_"); c != a {
		t.Fatalf("same time and randomness gave %q and %q", a, c)
	}
}
