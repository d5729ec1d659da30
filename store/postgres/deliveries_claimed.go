package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cool-ai/beachd/store"
)

// An outcome is written in one statement when its worker's claim was made
// here: the claim read the job's record, and the outcome is applied to
// that copy. The statement writes a record only where the job still has
// the caller's lease and a record byte for byte the one the claim read,
// so a record changed in between (a provider's status callback) or a
// lease lost is written as before, its row locked and read again
// (recordTx). Each outcome so written saves the transaction's BEGIN, the
// row lock statement and the COMMIT: three round trips a group of
// outcomes, with the rows locked for one statement instead of four.

// maxClaimedDocs bounds the records kept: room for every job in flight
// (workers and the claim buffer), and past it an arbitrary one is dropped
// (its outcome is then written as before).
const maxClaimedDocs = 8192

// claimedDocs are the stored records of the jobs this process leased, as
// the claim read them, until their outcome or release.
type claimedDocs struct {
	mu sync.Mutex
	m  map[string]claimedDoc
	// written counts the outcomes recordClaimed wrote.
	written atomic.Int64
}

// claimedDoc is one job's lease and record as claimed.
type claimedDoc struct {
	lease int64
	doc   []byte
}

func (c *claimedDocs) put(id string, lease int64, doc []byte) {
	if doc == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]claimedDoc)
	}
	if len(c.m) >= maxClaimedDocs {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[id] = claimedDoc{lease: lease, doc: doc}
}

// take removes and returns id's record.
func (c *claimedDocs) take(id string) (claimedDoc, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.m[id]
	if ok {
		delete(c.m, id)
	}
	return d, ok
}

// recordClaimedSQL writes the records and attempts of outcomes applied to
// the records their claims read: a record is written only where the row
// still has the outcome's lease and that record ($6, $7), and its attempt
// only with it; RETURNING names the deliveries written. The rows are
// taken in id order, as every statement that locks several does.
const recordClaimedSQL = `WITH u AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::json[], $6::bigint[], $7::text[])
		AS u (id, state, due_ns, updated_ns, doc, lease, prev) ORDER BY id),
w AS (UPDATE deliveries AS d SET state = u.state, due_ns = u.due_ns, lease_until_ns = NULL,
	lease_holder = NULL, updated_ns = u.updated_ns, doc = u.doc
	FROM u WHERE d.id = u.id AND d.lease_until_ns = u.lease AND d.doc::text = u.prev
	RETURNING d.id)
INSERT INTO attempts (delivery_id, n, doc)
	SELECT a.id, a.n, a.doc FROM unnest($1::text[], $8::int[], $9::json[]) AS a (id, n, doc) JOIN w ON w.id = a.id
	ON CONFLICT (delivery_id, n) DO UPDATE SET doc = EXCLUDED.doc
	RETURNING delivery_id`

// recordClaimed writes, in one statement, the outcomes of rs whose job's
// record this process's claim read, and returns the others: those it did
// not read, those with provider ids or timers to write, and those the
// statement did not write (record or lease changed), for recordTx. A
// failed statement writes nothing and returns rs.
func (s *DB) recordClaimed(ctx context.Context, rs []*recordReq) []*recordReq {
	var rest, fast []*recordReq
	var w outcomeRows
	var leases []int64
	var prevs []string
	now := s.now()
	for _, r := range rs {
		c, ok := s.claimed.take(r.id)
		if !ok || c.lease != nanos(r.leaseUntil) || r.o.FollowDecision || len(store.OutcomeProviderIDs(&r.o)) > 0 {
			rest = append(rest, r)
			continue
		}
		d, err := decodeDelivery(c.doc)
		if err != nil {
			rest = append(rest, r)
			continue
		}
		store.ApplyOutcome(d, &r.o, now)
		if err := w.add(d, &r.o.Attempt); err != nil {
			rest = append(rest, r)
			continue
		}
		leases, prevs = append(leases, c.lease), append(prevs, string(c.doc))
		r.out = d
		fast = append(fast, r)
	}
	if len(fast) == 0 {
		return rs
	}
	written, err := s.writeClaimed(ctx, &w, leases, prevs)
	if err != nil {
		s.log.Warn("record outcomes in one statement failed; recording them again", "outcomes", len(fast), "err", err)
		for _, r := range fast {
			r.out = nil
		}
		return rs
	}
	s.claimed.written.Add(int64(len(written)))
	for _, r := range fast {
		if !written[r.id] {
			r.out = nil
			rest = append(rest, r)
		}
	}
	return rest
}

// writeClaimed runs recordClaimedSQL for w's rows and returns the ids
// written.
func (s *DB) writeClaimed(ctx context.Context, w *outcomeRows, leases []int64, prevs []string) (map[string]bool, error) {
	var written map[string]bool
	err := retrying(func() error {
		written = make(map[string]bool, len(w.ids))
		rows, err := s.pool.Query(ctx, recordClaimedSQL, s.planEach, w.ids, w.states, w.dues, w.updated, w.docs, leases, prevs, w.ns, w.attempts)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			written[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	return written, nil
}
