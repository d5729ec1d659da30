package store

import (
	"bytes"
	"crypto/rand"
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

func BenchmarkNewIDAt(b *testing.B) {
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if id := NewIDAt(now, rand.Reader, "dlv_"); len(id) != 30 {
			b.Fatal(id)
		}
	}
}

// An id is its prefix and the base32 of its 16 bytes, whatever the
// prefix's length.
func TestNewIDAtIsPrefixAndBase32(t *testing.T) {
	at := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	rnd := bytes.Repeat([]byte{0x5a}, 10)
	for _, prefix := range []string{"", "dlv_", strings.Repeat("p", 64), strings.Repeat("q", 65), strings.Repeat("r", 300)} {
		ms := at.UnixMilli() // 0x01a250cde300
		b := append([]byte{byte(ms >> 40), byte(ms >> 32), byte(ms >> 24), byte(ms >> 16), byte(ms >> 8), byte(ms)}, rnd...)
		want := prefix + idEncoding.EncodeToString(b)
		if got := NewIDAt(at, bytes.NewReader(rnd), prefix); got != want {
			t.Errorf("prefix of %d: got %q, want %q", len(prefix), got, want)
		}
	}
}
