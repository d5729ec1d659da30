package bolt

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/zstd"
	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// Envelope bodies are the largest part of a queued delivery's footprint (an
// 832-byte envelope is more than half of it), so they are stored zstd-
// compressed when that saves at least an eighth: a typical envelope's JSON
// compresses to about 57% of its size, for about 16 µs to compress at
// ingest and 5 µs to decompress at each send. A stored body that starts
// with zstd's frame magic is compressed; JSON never starts so (it starts
// with '{'), and bodies stored before compression are read as they are.
var (
	zstdMagic   = []byte{0x28, 0xb5, 0x2f, 0xfd}
	bodyEncoder *zstd.Encoder
	bodyDecoder *zstd.Decoder
)

// minCompressBody: shorter bodies are stored as they are.
const minCompressBody = 256

// maxBodyBytes bounds a decompressed body: a body is at most the ingest
// limit, so a larger one means a damaged file.
const maxBodyBytes = 64 << 20

func init() {
	var err error
	bodyEncoder, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true),
		zstd.WithWindowSize(1<<20))
	if err != nil {
		panic(err)
	}
	bodyDecoder, err = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxBodyBytes), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic(err)
	}
}

// encodeBody is the stored form of an envelope body.
func encodeBody(b []byte) []byte {
	if len(b) < minCompressBody {
		return b
	}
	c := bodyEncoder.EncodeAll(b, make([]byte, 0, len(b)/2))
	if len(c) > len(b)-len(b)/8 {
		return b
	}
	return c
}

// decodeBody returns a copy of the envelope body stored as v.
func decodeBody(v []byte) ([]byte, error) {
	if !bytes.HasPrefix(v, zstdMagic) {
		return append([]byte(nil), v...), nil
	}
	b, err := bodyDecoder.DecodeAll(v, make([]byte, 0, 2*len(v)))
	if err != nil {
		return nil, fmt.Errorf("%w: envelope body: %v", store.ErrCorrupt, err)
	}
	return b, nil
}

// appendFill is the fill of pages split by appends to buckets whose keys
// grow (time-ordered ids): bbolt's default of one half leaves every page
// of such a bucket half empty.
const appendFill = 1.0

// fillForAppends sets appendFill on the buckets an ingest appends to, for
// this transaction.
func fillForAppends(tx *bbolt.Tx) {
	for _, name := range [][]byte{bEnvelopes, bEnvelopeBodies, bDeliveries, bDue, bByState} {
		tx.Bucket(name).FillPercent = appendFill
	}
}
