package store

import (
	"encoding/base32"
	"fmt"
	"io"
	"time"
)

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewIDAt returns prefix + a 26-character id that sorts by creation time:
// 48 bits of now's milliseconds, then 80 bits read from r. Every backend's
// NewID is this.
func NewIDAt(now time.Time, r io.Reader, prefix string) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	if _, err := io.ReadFull(r, b[6:]); err != nil {
		panic(fmt.Sprintf("store: read randomness: %v", err))
	}
	// Encoded in place, one allocation fewer than prefix +
	// EncodeToString: every ingest makes an id for the envelope and one
	// for each delivery.
	var out [64 + 26]byte
	if len(prefix) > 64 {
		return prefix + idEncoding.EncodeToString(b[:])
	}
	n := copy(out[:], prefix)
	idEncoding.Encode(out[n:], b[:])
	return string(out[:n+idEncoding.EncodedLen(len(b))])
}
