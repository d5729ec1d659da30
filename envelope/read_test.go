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
