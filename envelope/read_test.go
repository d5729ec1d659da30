package envelope

import (
	"errors"
	"strings"
	"testing"
)

func TestReadLimitedSize(t *testing.T) {
	body := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name  string
		limit int64
		size  int64
		want  int // bytes read; -1: TooLargeError
	}{
		{"unknown size", 1000, -1, 100},
		{"announced exactly", 1000, 100, 100},
		{"announced short: what is read decides", 1000, 10, 100},
		{"announced long", 1000, 500, 100},
		{"over the limit, announced within it", 50, 40, -1},
		{"over the limit, announced over it", 50, 100, -1},
		{"at the limit", 100, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ReadLimitedSize(strings.NewReader(body), tc.limit, tc.size)
			if tc.want < 0 {
				var tl *TooLargeError
				if !errors.As(err, &tl) || tl.Limit != tc.limit {
					t.Fatalf("err = %v, want TooLargeError{%d}", err, tc.limit)
				}
				return
			}
			if err != nil || len(b) != tc.want {
				t.Fatalf("read %d bytes, err %v; want %d", len(b), err, tc.want)
			}
		})
	}
}

// reserveRecorder is a body that records how much room its reader had
// reserved for it (what was read plus the free space offered) at its
// largest, delivers chunk bytes at a time up to sent, then fails.
type reserveRecorder struct {
	chunk, sent, read int
	reserved          int
}

func (r *reserveRecorder) Read(p []byte) (int, error) {
	r.reserved = max(r.reserved, r.read+len(p))
	if r.read >= r.sent {
		return 0, errors.New("client went quiet")
	}
	n := min(len(p), r.chunk, r.sent-r.read)
	r.read += n
	return n, nil
}

func TestReadLimitedSizeReservesWhatArrives(t *testing.T) {
	for _, tc := range []struct {
		name            string
		announced, sent int
		most            int // the most the reader may reserve
	}{
		{"8 MiB announced, 1 KiB sent", 8 << 20, 1 << 10, FirstPiece + 2*512},
		{"8 MiB announced, 200 KiB sent", 8 << 20, 200 << 10, 4 * (200<<10 + 512)},
		{"unknown length, 1 KiB sent", -1, 1 << 10, 4 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &reserveRecorder{chunk: 4096, sent: tc.sent}
			if _, err := ReadLimitedSize(r, 9<<20, int64(tc.announced)); err == nil {
				t.Fatal("a body that failed was read without an error")
			}
			if r.reserved > tc.most {
				t.Errorf("reserved %d bytes for a body that sent %d; at most %d", r.reserved, tc.sent, tc.most)
			}
		})
	}
}

// An ordinary body whose length is announced is read into one buffer of
// its size (and room to see the end), never grown.
func TestReadLimitedSizeOneBuffer(t *testing.T) {
	for _, n := range []int{892, 60 << 10} {
		b, err := ReadLimitedSize(strings.NewReader(strings.Repeat("x", n)), 8<<20, int64(n))
		if err != nil || len(b) != n {
			t.Fatalf("read %d bytes, %v", len(b), err)
		}
		if cap(b) != n+512 {
			t.Errorf("%d-byte body read into a buffer of %d bytes, want one of %d", n, cap(b), n+512)
		}
	}
}
