package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// Delivery records are written in a compact binary form (schema 2): the
// dispatcher reads and rewrites one per attempt, inside the write
// transaction every ingest shares, and JSON cost several times more there.
// Records written by schema 1 (JSON, first byte '{') are still read.
//
//	0x02 flags(uvarint) ID EnvelopeID Channel To Agent State LastError
//	DeadReason ProviderID ProviderStatus (each uvarint length + bytes)
//	Attempts(uvarint) CreatedAt UpdatedAt [NextAttemptAt] [SentAt]
//	(each varint unix ns, MinInt64 for the zero time; the bracketed ones
//	only when their flag is set)
//	len(ApprovalIDs) ids… len(Extra) (key value)… in key order
const deliveryCodec = 0x02

const (
	flagMaybeSent = 1 << iota
	flagNext
	flagSent
)

// maxDeliveryField bounds one decoded string or list length: a record is
// written by this package, so a larger value means a damaged file.
const maxDeliveryField = 1 << 20

func encodeDelivery(d *store.Delivery) []byte {
	n := 64 + len(d.ID) + len(d.EnvelopeID) + len(d.Channel) + len(d.To) + len(d.Agent) + len(d.State) +
		len(d.LastError) + len(d.DeadReason) + len(d.ProviderID) + len(d.ProviderStatus)
	for _, a := range d.ApprovalIDs {
		n += 2 + len(a)
	}
	for k, v := range d.Extra {
		n += 4 + len(k) + len(v)
	}
	b := make([]byte, 0, n)
	var flags uint64
	if d.MaybeSent {
		flags |= flagMaybeSent
	}
	if !d.NextAttemptAt.IsZero() {
		flags |= flagNext
	}
	if !d.SentAt.IsZero() {
		flags |= flagSent
	}
	b = append(b, deliveryCodec)
	b = binary.AppendUvarint(b, flags)
	for _, s := range [...]string{d.ID, d.EnvelopeID, d.Channel, d.To, d.Agent, string(d.State),
		d.LastError, d.DeadReason, d.ProviderID, d.ProviderStatus} {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(max(d.Attempts, 0)))
	b = appendTime(b, d.CreatedAt)
	b = appendTime(b, d.UpdatedAt)
	if flags&flagNext != 0 {
		b = appendTime(b, d.NextAttemptAt)
	}
	if flags&flagSent != 0 {
		b = appendTime(b, d.SentAt)
	}
	b = binary.AppendUvarint(b, uint64(len(d.ApprovalIDs)))
	for _, a := range d.ApprovalIDs {
		b = appendString(b, a)
	}
	b = binary.AppendUvarint(b, uint64(len(d.Extra)))
	keys := make([]string, 0, len(d.Extra))
	for k := range d.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, d.Extra[k])
	}
	return b
}

// zeroTime stands for time.Time{}, whose UnixNano is out of range.
const zeroTime = math.MinInt64

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return binary.AppendVarint(b, zeroTime)
	}
	return binary.AppendVarint(b, t.UnixNano())
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errShortRecord = errors.New("record ends early")

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShortRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShortRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) count() int {
	n := r.uvarint()
	if n > maxDeliveryField || n > uint64(len(r.b)) {
		if r.err == nil {
			r.err = fmt.Errorf("length %d exceeds the record", n)
		}
		return 0
	}
	return int(n)
}

func (r *reader) string() string {
	n := r.count()
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) time() time.Time {
	if ns := r.varint(); ns != zeroTime {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// decodeDelivery reads a delivery record of either schema.
func decodeDelivery(data []byte, d *store.Delivery) error {
	if len(data) > 0 && data[0] == '{' {
		return json.Unmarshal(data, d)
	}
	if len(data) == 0 || data[0] != deliveryCodec {
		return fmt.Errorf("%w: unknown delivery record format", store.ErrCorrupt)
	}
	r := reader{b: data[1:]}
	flags := r.uvarint()
	*d = store.Delivery{}
	d.ID = r.string()
	d.EnvelopeID = r.string()
	d.Channel = r.string()
	d.To = r.string()
	d.Agent = r.string()
	d.State = store.State(r.string())
	d.LastError = r.string()
	d.DeadReason = r.string()
	d.ProviderID = r.string()
	d.ProviderStatus = r.string()
	d.Attempts = int(min(r.uvarint(), maxDeliveryField))
	d.CreatedAt = r.time()
	d.UpdatedAt = r.time()
	if flags&flagNext != 0 {
		d.NextAttemptAt = r.time()
	}
	if flags&flagSent != 0 {
		d.SentAt = r.time()
	}
	d.MaybeSent = flags&flagMaybeSent != 0
	if n := r.count(); n > 0 {
		d.ApprovalIDs = make([]string, n)
		for i := range d.ApprovalIDs {
			d.ApprovalIDs[i] = r.string()
		}
	}
	if n := r.count(); n > 0 {
		d.Extra = make(map[string]string, n)
		for range n {
			k := r.string()
			d.Extra[k] = r.string()
		}
	}
	if r.err != nil {
		return fmt.Errorf("%w: delivery record: %v", store.ErrCorrupt, r.err)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: delivery record: %d bytes after its end", store.ErrCorrupt, len(r.b))
	}
	return nil
}

// getDelivery reads the delivery at key from the deliveries bucket b.
func getDelivery(b *bbolt.Bucket, key []byte, d *store.Delivery) error {
	data := b.Get(key)
	if data == nil {
		return store.ErrNotFound
	}
	if err := decodeDelivery(data, d); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

// Envelope records (without the body, which has a bucket of its own) are
// written in a compact binary form too; JSON records (first byte '{')
// written before it are still read. The key is the envelope's id, so the
// record does not repeat it.
//
//	0x02 Agent Source (each uvarint length + bytes) CreatedAt (varint unix
//	ns) len(DeliveryIDs) ids…
const envelopeCodec = 0x02

func encodeEnvelope(rec *store.EnvelopeRecord) []byte {
	n := 24 + len(rec.Agent) + len(rec.Source)
	for _, id := range rec.DeliveryIDs {
		n += 2 + len(id)
	}
	b := make([]byte, 0, n)
	b = append(b, envelopeCodec)
	b = appendString(b, rec.Agent)
	b = appendString(b, rec.Source)
	b = appendTime(b, rec.CreatedAt)
	b = binary.AppendUvarint(b, uint64(len(rec.DeliveryIDs)))
	for _, id := range rec.DeliveryIDs {
		b = appendString(b, id)
	}
	return b
}

// decodeEnvelope reads the envelope record stored under key in either
// form.
func decodeEnvelope(key, data []byte, rec *store.EnvelopeRecord) error {
	if len(data) > 0 && data[0] == '{' {
		return json.Unmarshal(data, rec)
	}
	if len(data) == 0 || data[0] != envelopeCodec {
		return fmt.Errorf("%w: unknown envelope record format", store.ErrCorrupt)
	}
	r := reader{b: data[1:]}
	*rec = store.EnvelopeRecord{ID: string(key)}
	rec.Agent = r.string()
	rec.Source = r.string()
	rec.CreatedAt = r.time()
	if n := r.count(); n > 0 {
		rec.DeliveryIDs = make([]string, n)
		for i := range rec.DeliveryIDs {
			rec.DeliveryIDs[i] = r.string()
		}
	}
	if r.err != nil {
		return fmt.Errorf("%w: envelope record: %v", store.ErrCorrupt, r.err)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: envelope record: %d bytes after its end", store.ErrCorrupt, len(r.b))
	}
	return nil
}

// getEnvelope reads the envelope record at key from the envelopes bucket
// b (store.ErrNotFound when there is none).
func getEnvelope(b *bbolt.Bucket, key []byte, rec *store.EnvelopeRecord) error {
	data := b.Get(key)
	if data == nil {
		return store.ErrNotFound
	}
	if err := decodeEnvelope(key, data, rec); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}
