package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Ingest stores an envelope, its deliveries and approvals in one
// transaction. With an idempotency key, the key is taken first (a unique
// row): of concurrent ingests with one key, one writes and the others wait
// for it and then answer its result, or refuse another request's body.
func (s *DB) Ingest(ctx context.Context, in store.Ingest) (*store.IngestResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(in.IdempotencyKey) > store.MaxKey {
		return nil, fmt.Errorf("ingest: idempotency key of %d bytes; at most %d", len(in.IdempotencyKey), store.MaxKey)
	}
	if err := checkChannels(&in); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	now := s.now()
	if err := store.CheckHandOffs(&in, now); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	w := s.newIngestWrite(&in)
	var res *store.IngestResult
	var err error
	if plainIngest(&in) {
		res, err = s.writePlainIngest(ctx, w)
		if err == nil && res == nil {
			// Its key was held by another ingest (or is one whose
			// envelope was pruned): answered as any keyed ingest is.
			res, err = s.ingestTx(ctx, &in, w, now)
		}
	} else {
		res, err = s.ingestTx(ctx, &in, w, now)
	}
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if !res.Replayed && anyDue(res) {
		s.wakeDispatchers(ctx)
	}
	return res, nil
}

// ingestTx stores in in a transaction of its own, taking its idempotency
// key first when it has one.
func (s *DB) ingestTx(ctx context.Context, in *store.Ingest, w *ingestWrite, now time.Time) (*store.IngestResult, error) {
	var res *store.IngestResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		res = nil
		if in.IdempotencyKey != "" {
			prev, err := s.takeIdempotencyKey(ctx, tx, in, w.envID, now)
			if err != nil || prev != nil {
				res = prev
				return err
			}
		}
		out, err := s.writeIngests(ctx, tx, []*ingestWrite{w}, now)
		if err != nil {
			return err
		}
		res = out[0]
		return nil
	})
	return res, err
}

// IngestBulk stores many envelopes with their deliveries and approvals in
// one transaction (a loader for scale tests and imports). It refuses
// idempotency keys, which need the per-request check of Ingest.
func (s *DB) IngestBulk(ctx context.Context, ins []store.Ingest) ([]*store.IngestResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ws := make([]*ingestWrite, len(ins))
	for i := range ins {
		if ins[i].IdempotencyKey != "" {
			return nil, errors.New("bulk ingest: idempotency keys are not supported")
		}
		if store.HandsOff(&ins[i]) {
			return nil, errors.New("bulk ingest: hand-offs (LeaseUntil) are not supported")
		}
		if err := checkChannels(&ins[i]); err != nil {
			return nil, fmt.Errorf("bulk ingest: %w", err)
		}
		ws[i] = s.newIngestWrite(&ins[i])
	}
	now := s.now()
	var out []*store.IngestResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.writeIngests(ctx, tx, ws, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bulk ingest: %w", err)
	}
	if anyDue(out...) {
		s.wakeDispatchers(ctx)
	}
	return out, nil
}

// anyDue reports whether an ingest made a delivery due (one not held and
// not handed off).
func anyDue(rs ...*store.IngestResult) bool {
	for _, r := range rs {
		for _, d := range r.Deliveries {
			if d.State != store.StateHeld && d.State != store.StateSending {
				return true
			}
		}
	}
	return false
}

// checkChannels refuses a delivery to something that is not a channel name.
func checkChannels(in *store.Ingest) error {
	for _, d := range in.Deliveries {
		if !validChannelName(d.Channel) {
			return fmt.Errorf("%w: channel %q is not a channel name", store.ErrBadState, d.Channel)
		}
	}
	return nil
}

// ingestWrite is one envelope to write, with its new ids.
type ingestWrite struct {
	in    *store.Ingest
	envID string
	ids   []string
	// holder is this replica, the holder of handed-off deliveries' leases.
	holder string
}

// plainIngest reports an ingest that only inserts rows: no approvals to
// check and store, no conversation to index, and at most an idempotency key
// to insert (a key already held is answered by ingestTx).
func plainIngest(in *store.Ingest) bool {
	if len(in.Approvals) > 0 {
		return false
	}
	for _, nd := range in.Deliveries {
		if nd.Extra[envelope.ExtraConversation] != "" {
			return false
		}
	}
	return true
}

// writePlainIngest stores a plain ingest with the others waiting at the
// same time (ingestGroup): their inserts go as one pipeline ending in a
// single Sync, which PostgreSQL runs as one implicit transaction — every
// row of the group or none, committed at the Sync (a group with idempotency
// keys is an explicit transaction: the keys, then the inserts). It returns once the
// group is committed. A caller whose context ends before its ingest joins
// a group stores nothing. An ingest whose idempotency key is already held
// (by a stored ingest, by another of its group, or by one committing at
// the same time) stores nothing and answers nil, nil: the caller answers
// it in a transaction of its own, which replays or refuses.
func (s *DB) writePlainIngest(ctx context.Context, w *ingestWrite) (*store.IngestResult, error) {
	req := &ingestReq{w: w, done: make(chan struct{})}
	select {
	case s.ingests <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closing:
		return nil, errClosed
	}
	<-req.done
	return req.res, req.err
}

// ingestReq is one plain ingest waiting for its group's commit.
type ingestReq struct {
	w    *ingestWrite
	res  *store.IngestResult
	err  error
	done chan struct{}
}

// Plain ingests are committed in groups of at most maxIngestGroup, by
// ingestWorkers at a time: while one group's commit waits for its WAL
// flush, the next group forms.
const (
	maxIngestGroup = 64
	ingestWorkers  = 2
)

// ingestGroup writes group's ingests in one transaction, each
// request's result in its res or err; a group whose transaction fails is
// written again one ingest at a time, so that one ingest's failure is its
// own. Every ingest of a group is stored at the same time. Of two ingests
// of a group with one idempotency key, the second is left to its caller
// (res and err nil), which answers it once the first is committed.
func (s *DB) ingestGroup(group []*ingestReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys map[string]bool
	first := group[:0:0]
	for _, r := range group {
		if k := r.w.in.IdempotencyKey; k != "" {
			if keys[k] {
				r.res, r.err = nil, nil
				continue
			}
			if keys == nil {
				keys = make(map[string]bool, len(group))
			}
			keys[k] = true
		}
		first = append(first, r)
	}
	group = first
	if len(group) > 1 {
		err := s.insertPlain(ctx, group)
		if err == nil {
			return
		}
	}
	for _, r := range group {
		if err := s.insertPlain(ctx, []*ingestReq{r}); err != nil {
			r.res, r.err = nil, err
		}
	}
}

// insertPlain writes the ingests of rs as one pipeline and gives each its
// result; on an error, no ingest of rs is stored. When some have an
// idempotency key, the keys are taken first, in key order (so that two
// groups never wait for each other's keys in a cycle), in the same
// transaction: an ingest whose key is already held stores nothing and
// gets res nil.
func (s *DB) insertPlain(ctx context.Context, rs []*ingestReq) error {
	now := s.now()
	var keyed []*ingestReq
	for _, r := range rs {
		r.res, r.err = nil, nil
		if r.w.in.IdempotencyKey != "" {
			keyed = append(keyed, r)
		}
	}
	// write inserts the ingests of rs that have no key or took theirs.
	write := func(q batcher, taken map[string]bool) error {
		var rows ingestRows
		for _, r := range rs {
			if r.w.in.IdempotencyKey != "" && !taken[r.w.envID] {
				r.res = nil
				continue
			}
			res, err := rows.add(r.w, now)
			if err != nil {
				return err
			}
			r.res = res
		}
		if len(rows.envIDs) == 0 {
			return nil
		}
		s.keepHanded(&rows)
		return q.SendBatch(ctx, rows.batch(now)).Close()
	}
	err := retrying(func() error {
		if len(keyed) == 0 {
			return write(s.pool, nil)
		}
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			taken, err := takeKeys(ctx, tx, keyed, now)
			if err != nil {
				return err
			}
			return write(tx, taken)
		})
	})
	if err != nil {
		for _, r := range rs {
			r.res = nil
		}
		return fmt.Errorf("insert envelopes: %w", err)
	}
	return nil
}

// batcher sends a pipeline: the pool (one implicit transaction) or a
// transaction.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// takeKeys inserts the idempotency keys of keyed that no other ingest
// holds, in key order, and answers the envelope ids of those it took.
func takeKeys(ctx context.Context, tx pgx.Tx, keyed []*ingestReq, now time.Time) (map[string]bool, error) {
	byKey := slices.Clone(keyed)
	slices.SortFunc(byKey, func(a, b *ingestReq) int { return strings.Compare(a.w.in.IdempotencyKey, b.w.in.IdempotencyKey) })
	keys, hashes, envs := make([]string, len(byKey)), make([][]byte, len(byKey)), make([]string, len(byKey))
	for i, r := range byKey {
		keys[i], hashes[i], envs[i] = r.w.in.IdempotencyKey, r.w.in.RequestHash[:], r.w.envID
	}
	rows, err := tx.Query(ctx, insertKeysSQL, nanos(now), keys, hashes, envs)
	if err != nil {
		return nil, err
	}
	taken := make(map[string]bool, len(keyed))
	var env string
	if _, err := pgx.ForEachRow(rows, []any{&env}, func() error {
		taken[env] = true
		return nil
	}); err != nil {
		return nil, err
	}
	return taken, nil
}

// insertKeysSQL takes the idempotency keys of a group's ingests that no
// other ingest holds, and returns the envelope ids of those it took. A key
// another transaction is inserting waits for it to end.
const insertKeysSQL = `INSERT INTO idempotency (key, hash, envelope_id, created_ns)
	SELECT key, hash, envelope_id, $1 FROM unnest($2::text[], $3::bytea[], $4::text[]) AS u (key, hash, envelope_id)
	ON CONFLICT (key) DO NOTHING RETURNING envelope_id`

// newIngestWrite gives in its envelope and delivery ids.
func (s *DB) newIngestWrite(in *store.Ingest) *ingestWrite {
	w := &ingestWrite{in: in, envID: s.NewID("env_"), ids: make([]string, len(in.Deliveries)), holder: s.holder}
	for i := range w.ids {
		w.ids[i] = s.NewID("dlv_")
	}
	return w
}

// takeIdempotencyKey takes the ingest's key for envID. When another ingest
// holds it, it answers that ingest's result (Replayed), or
// ErrIdempotencyConflict for another body; when the key's envelope has
// been pruned, the key is taken over for envID (a new request) and the
// answer is nil, as for a new key.
func (s *DB) takeIdempotencyKey(ctx context.Context, tx pgx.Tx, in *store.Ingest, envID string, now time.Time) (*store.IngestResult, error) {
	for {
		tag, err := tx.Exec(ctx, `INSERT INTO idempotency (key, hash, envelope_id, created_ns) VALUES ($1, $2, $3, $4)
			ON CONFLICT (key) DO NOTHING`, in.IdempotencyKey, in.RequestHash[:], envID, nanos(now))
		if err != nil {
			return nil, fmt.Errorf("take idempotency key: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return nil, nil
		}
		var hash []byte
		var prevEnv string
		err = tx.QueryRow(ctx, `SELECT hash, envelope_id FROM idempotency WHERE key = $1 FOR UPDATE`,
			in.IdempotencyKey).Scan(&hash, &prevEnv)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // pruned meanwhile: take it again
		}
		if err != nil {
			return nil, fmt.Errorf("read idempotency key: %w", err)
		}
		if !bytes.Equal(hash, in.RequestHash[:]) {
			return nil, store.ErrIdempotencyConflict
		}
		res, err := s.ingestResult(ctx, tx, prevEnv)
		switch {
		case err == nil:
			res.Replayed = true
			return res, nil
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		// Retention removed the envelope before its key: the key has
		// expired too, and the request is a new one.
		if _, err := tx.Exec(ctx, `UPDATE idempotency SET envelope_id = $2, created_ns = $3 WHERE key = $1`,
			in.IdempotencyKey, envID, nanos(now)); err != nil {
			return nil, fmt.Errorf("renew idempotency key: %w", err)
		}
		return nil, nil
	}
}

// ingestResult answers again what the ingest of the envelope envID
// answered: its deliveries in their state at acceptance (queued).
func (s *DB) ingestResult(ctx context.Context, tx pgx.Tx, envID string) (*store.IngestResult, error) {
	var doc []byte
	err := tx.QueryRow(ctx, `SELECT doc FROM envelopes WHERE id = $1`, envID).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read envelope %s: %w", envID, err)
	}
	var rec store.EnvelopeRecord
	if err := json.Unmarshal(doc, &rec); err != nil {
		return nil, fmt.Errorf("envelope %s: %w: %v", envID, store.ErrCorrupt, err)
	}
	rows, err := tx.Query(ctx, `SELECT doc, NULL::bigint FROM deliveries WHERE id = ANY($1)`, s.planEach, rec.DeliveryIDs)
	if err != nil {
		return nil, fmt.Errorf("read deliveries of %s: %w", envID, err)
	}
	ds, err := scanDeliveries(rows)
	if err != nil {
		return nil, fmt.Errorf("read deliveries of %s: %w", envID, err)
	}
	byID := make(map[string]*store.Delivery, len(ds))
	for _, d := range ds {
		byID[d.ID] = d
	}
	out := &store.IngestResult{EnvelopeID: envID}
	for _, id := range rec.DeliveryIDs {
		d := byID[id]
		if d == nil {
			return nil, store.ErrNotFound
		}
		d.State = store.StateQueued
		out.Deliveries = append(out.Deliveries, d)
	}
	return out, nil
}

const insertEnvelopesSQL = `INSERT INTO envelopes (id, created_ns, body, doc)
	SELECT id, $1, body, doc FROM unnest($2::text[], $3::bytea[], $4::json[]) AS u (id, body, doc)`

const insertDeliveriesSQL = `INSERT INTO deliveries
	(id, envelope_id, channel, recipient, agent, state, due_ns, created_ns, updated_ns, conversation, doc, lease_until_ns, lease_holder)
	SELECT id, envelope_id, channel, recipient, agent, state, due_ns, $1, $1, conversation, doc, lease_until_ns, NULLIF(lease_holder, '')
	FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::json[], $11::bigint[], $12::text[])
	AS u (id, envelope_id, channel, recipient, agent, state, due_ns, conversation, doc, lease_until_ns, lease_holder)`

// ingestRows are the rows of envelopes and deliveries an ingest inserts,
// column by column (one multi-row INSERT each).
type ingestRows struct {
	envIDs, envDocs                                 []string
	bodies                                          [][]byte
	ids, envs, channels, tos, agents, states, convs []string
	dues                                            []*int64
	// leases and holders are a handed-off delivery's lease (nil and ""
	// for the others).
	leases  []*int64
	holders []string
	docs    []string
	// handed are the handed-off deliveries' records, for s.claimed.
	handed []handedOff
}

// handedOff is a delivery an ingest stores leased to this process's
// dispatcher, with the record stored.
type handedOff struct {
	id    string
	lease int64
	doc   []byte
}

// keepHanded keeps the records of r's handed-off deliveries as a claim
// keeps those it reads, before they are committed: a worker has them only
// once their ingest has returned, and a record that was never committed
// matches no row (recordClaimed).
func (s *DB) keepHanded(r *ingestRows) {
	for _, h := range r.handed {
		s.claimed.put(h.id, h.lease, h.doc)
	}
}

// writeIngests writes accepted envelopes, their deliveries (due at the
// ingest's NotBefore or now, or held) and approvals, as the embedded
// store's writeIngestTx does, and wakes the dispatchers when some delivery
// is due.
func (s *DB) writeIngests(ctx context.Context, tx pgx.Tx, ws []*ingestWrite, now time.Time) ([]*store.IngestResult, error) {
	for _, w := range ws {
		if len(w.in.Approvals) > 0 {
			if err := s.checkApprovalsTx(ctx, tx, w.in.Approvals); err != nil {
				return nil, err
			}
		}
	}
	var rows ingestRows
	out := make([]*store.IngestResult, len(ws))
	for i, w := range ws {
		res, err := rows.add(w, now)
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	s.keepHanded(&rows)
	if err := runBatch(ctx, tx, rows.batch(now)); err != nil {
		return nil, fmt.Errorf("insert envelopes: %w", err)
	}
	for i, w := range ws {
		for _, d := range out[i].Deliveries {
			if conversationOf(d) != "" {
				if err := s.indexConversationDeliveryTx(ctx, tx, d); err != nil {
					return nil, err
				}
			}
		}
		if len(w.in.Approvals) > 0 {
			if err := s.putApprovalsTx(ctx, tx, w.envID, w.in.Approvals, now); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// batch inserts the rows' envelopes and deliveries.
func (r *ingestRows) batch(now time.Time) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(insertEnvelopesSQL, nanos(now), r.envIDs, r.bodies, r.envDocs)
	b.Queue(insertDeliveriesSQL, nanos(now), r.ids, r.envs, r.channels, r.tos, r.agents,
		r.states, r.dues, r.convs, r.docs, r.leases, r.holders)
	return b
}

// add appends w's envelope and deliveries and returns what the ingest
// answers.
func (r *ingestRows) add(w *ingestWrite, now time.Time) (*store.IngestResult, error) {
	in := w.in
	first := now
	if in.NotBefore.After(now) {
		first = in.NotBefore
	}
	meta := store.EnvelopeRecord{ID: w.envID, Agent: in.Agent, CreatedAt: now, DeliveryIDs: w.ids, Source: in.Source}
	doc, err := convDoc(&meta)
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	body := []byte(in.Envelope)
	if body == nil {
		body = []byte{}
	}
	r.envIDs, r.bodies, r.envDocs = append(r.envIDs, w.envID), append(r.bodies, body), append(r.envDocs, string(doc))
	out := &store.IngestResult{EnvelopeID: w.envID}
	for i, nd := range in.Deliveries {
		d := &store.Delivery{ID: w.ids[i], EnvelopeID: w.envID, Channel: nd.Channel, To: nd.To, Agent: in.Agent,
			State: store.StateQueued, CreatedAt: now, UpdatedAt: now, NextAttemptAt: first,
			ApprovalIDs: nd.ApprovalIDs, Extra: nd.Extra}
		if nd.Held {
			d.State = store.StateHeld
		}
		due := dueNanos(d)
		doc, err := convDoc(d)
		if err != nil {
			return nil, fmt.Errorf("encode delivery: %w", err)
		}
		var until *int64
		holder := ""
		if !nd.LeaseUntil.IsZero() {
			// Handed off: stored as a claim leaves a job, and answered so.
			d.State, d.LeaseUntil = store.StateSending, nd.LeaseUntil
			n := nanos(nd.LeaseUntil)
			due, until, holder = nil, &n, w.holder
			r.handed = append(r.handed, handedOff{id: d.ID, lease: n, doc: doc})
		}
		r.ids, r.envs, r.channels, r.tos = append(r.ids, d.ID), append(r.envs, w.envID), append(r.channels, d.Channel), append(r.tos, d.To)
		r.agents, r.states, r.dues = append(r.agents, d.Agent), append(r.states, string(d.State)), append(r.dues, due)
		r.convs, r.docs = append(r.convs, conversationOf(d)), append(r.docs, string(doc))
		r.leases, r.holders = append(r.leases, until), append(r.holders, holder)
		out.Deliveries = append(out.Deliveries, d)
	}
	return out, nil
}

// Claim takes up to max due jobs, leases them until now+lease and returns
// them in state sending. admit, when set, is asked about each candidate
// (see store.Deliveries); a job it refuses stays due, and so do its
// recipient's other jobs in this claim.
func (s *DB) Claim(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) bool) ([]*store.Delivery, error) {
	var a func(*store.Delivery) store.Admission
	if admit != nil {
		a = func(d *store.Delivery) store.Admission {
			if admit(d) {
				return store.Admit
			}
			return store.RefuseRecipient
		}
	}
	return s.ClaimAdmitting(ctx, max, lease, a)
}

// dueChannelsCTE names ch every channel with a due job, one index probe a
// channel.
const dueChannelsCTE = `WITH RECURSIVE ch AS (
	(SELECT channel FROM deliveries WHERE due_ns IS NOT NULL ORDER BY channel LIMIT 1)
	UNION ALL
	SELECT (SELECT d.channel FROM deliveries d WHERE d.due_ns IS NOT NULL AND d.channel > ch.channel
		ORDER BY d.channel LIMIT 1)
	FROM ch WHERE ch.channel IS NOT NULL)`

// claimFirstSQL locks the first page of every channel's jobs due by $1,
// in due order; rows another claim holds are passed over.
const claimFirstSQL = dueChannelsCTE + `
	SELECT j.id, j.channel, j.recipient, j.due_ns, j.doc FROM ch CROSS JOIN LATERAL (
		SELECT d.id, d.channel, d.recipient, d.due_ns, d.doc FROM deliveries d
		WHERE d.channel = ch.channel AND d.due_ns <= $1
		ORDER BY d.due_ns, d.id LIMIT $2 FOR UPDATE SKIP LOCKED) j
	WHERE ch.channel IS NOT NULL
	ORDER BY j.channel, j.due_ns, j.id`

// claimNextSQL reads, without locking, the next page of one channel's
// due jobs after the job ($3, $4); each is locked when it is loaded
// (lockDueSQL).
const claimNextSQL = `SELECT id, channel, recipient, due_ns, NULL::json FROM deliveries
	WHERE channel = $1 AND due_ns <= $2 AND (due_ns, id) > ($3, $4)
	ORDER BY due_ns, id LIMIT $5`

// lockDueSQL locks one job read by claimNextSQL if it is still due and
// no other claim holds it.
const lockDueSQL = `SELECT doc FROM deliveries WHERE id = $1 AND due_ns <= $2 FOR UPDATE SKIP LOCKED`

// ClaimAdmitting is Claim with an admit that may also refuse a job's whole
// channel for this claim. It applies store.SelectClaims to one lane a
// channel, and leases the chosen jobs in the same transaction. A lane's
// first page of due jobs is read and locked in one statement for every
// channel (FOR UPDATE SKIP LOCKED: concurrent claims never take one job,
// and pass over each other's); a lane that needs more reads further pages
// without locks and locks each job as it loads it, so that the jobs a
// claim passes over (refused recipients, those behind the last it takes)
// stay free for others. A job another claim took meanwhile is a
// candidate whose load finds nothing (an orphan in SelectClaims' terms,
// with no index entry to remove here). The claim writes only the lease:
// the job's record stays as it is until Record rewrites it. A job whose
// lease ran out is not due until RequeueExpired makes it so.
func (s *DB) ClaimAdmitting(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) store.Admission) ([]*store.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	now := s.now()
	until := now.Add(lease)
	var out []*store.Delivery
	var docs map[string][]byte
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		c := &claim{ctx: ctx, tx: tx, now: nanos(now), first: firstPage(max, admit != nil), docs: map[string][]byte{}}
		docs = c.docs
		lanes, err := c.lanes()
		if err != nil {
			return err
		}
		choice := store.SelectClaims(lanes, max, until, admit)
		if c.err != nil {
			return c.err
		}
		if len(choice.Taken) == 0 {
			return nil
		}
		ids := make([]string, len(choice.Taken))
		for i, d := range choice.Taken {
			ids[i] = d.ID
		}
		if _, err := tx.Exec(ctx, `UPDATE deliveries SET state = 'sending', due_ns = NULL, lease_until_ns = $2,
			lease_holder = NULLIF($3, '') WHERE id = ANY($1)`, s.planEach, ids, nanos(until), s.holder); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		out = choice.Taken
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim due jobs: %w", err)
	}
	for _, d := range out {
		s.claimed.put(d.ID, nanos(until), docs[d.ID])
	}
	return out, nil
}

// claim is one ClaimAdmitting's reading of due jobs.
type claim struct {
	ctx context.Context
	tx  pgx.Tx
	now int64
	// first is how many jobs of each channel the first read locks.
	first int
	// docs are the stored records of the jobs loaded, by id.
	docs map[string][]byte
	// err is the first failed read; a lane ends at it.
	err error
}

// Further pages of a lane grow from minNextPage to maxNextPage jobs.
const (
	minNextPage = 16
	maxNextPage = 256
)

// firstPage is how many jobs of each channel a claim of max jobs locks at
// first: max when every job is taken, a few more when admit may refuse
// some. Locked jobs that are not taken stay due; other claims pass over
// them until this one commits.
func firstPage(max int, admits bool) int {
	if admits {
		max += max/4 + 4
	}
	return min(max, 1000)
}

// dueRow is one due job; doc is nil when it is not locked yet.
type dueRow struct {
	id, channel, to string
	due             int64
	doc             []byte
}

// lanes reads the first page of every channel and makes each a lane.
func (c *claim) lanes() ([]store.ClaimLane, error) {
	rows, err := c.tx.Query(c.ctx, claimFirstSQL, c.now, c.first)
	if err != nil {
		return nil, fmt.Errorf("read due jobs: %w", err)
	}
	all, err := scanDueRows(rows)
	if err != nil {
		return nil, fmt.Errorf("read due jobs: %w", err)
	}
	var lanes []store.ClaimLane
	for start := 0; start < len(all); {
		end := start
		for end < len(all) && all[end].channel == all[start].channel {
			end++
		}
		lanes = append(lanes, c.lane(all[start:end:end]))
		start = end
	}
	return lanes, nil
}

// lane yields the jobs of rows, then of the channel's further pages (each
// read when the previous one, which was full, is used up).
func (c *claim) lane(rows []dueRow) store.ClaimLane {
	full, size := len(rows) == c.first, minNextPage
	var last dueRow
	return func() (store.ClaimCandidate, bool) {
		if len(rows) == 0 && full && c.err == nil {
			rows = c.next(last, size)
			full, size = len(rows) == size, min(2*size, maxNextPage)
		}
		if len(rows) == 0 {
			return store.ClaimCandidate{}, false
		}
		last, rows = rows[0], rows[1:]
		return c.candidate(last), true
	}
}

// next reads the n due jobs after last in its channel, without locking.
func (c *claim) next(last dueRow, n int) []dueRow {
	rows, err := c.tx.Query(c.ctx, claimNextSQL, last.channel, c.now, last.due, last.id, n)
	if err == nil {
		var page []dueRow
		if page, err = scanDueRows(rows); err == nil {
			return page
		}
	}
	c.err = fmt.Errorf("read due jobs of %s: %w", last.channel, err)
	return nil
}

// scanDueRows reads rows of id, channel, recipient, due_ns, doc.
func scanDueRows(rows pgx.Rows) ([]dueRow, error) {
	defer rows.Close()
	var out []dueRow
	for rows.Next() {
		var r dueRow
		if err := rows.Scan(&r.id, &r.channel, &r.to, &r.due, &r.doc); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// candidate offers the due job r to store.SelectClaims. A record that
// does not decode is passed over (checkDeliveries names it); a job not
// locked yet is locked as it loads, and is store.ErrNotFound when another
// claim has it or it is no longer due.
func (c *claim) candidate(r dueRow) store.ClaimCandidate {
	return store.ClaimCandidate{
		Recipient: store.RecipientKey(r.channel, r.to),
		Due:       fromNanos(r.due),
		Ref:       []byte(r.id),
		Load: func() (*store.Delivery, error) {
			if r.doc == nil {
				err := c.tx.QueryRow(c.ctx, lockDueSQL, r.id, c.now).Scan(&r.doc)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil, store.ErrNotFound
				}
				if err != nil {
					c.err = fmt.Errorf("lock due job %s: %w", r.id, err)
					return nil, c.err
				}
			}
			c.docs[r.id] = r.doc
			return decodeDelivery(r.doc)
		},
	}
}

// Record stores the outcome of an attempt on a job this worker claimed
// (lease held until leaseUntil). If the job's lease is no longer that one
// (it ran out and the job was re-queued or re-claimed), it returns
// store.ErrLeaseLost and changes nothing. The outcome's ProviderID, and the
// ids its receipt lists in meta "parts", find the delivery until it is
// pruned.
//
// Record returns once the outcome is committed, as before, but the
// outcomes of concurrent workers are committed together (recordGroup): one
// transaction, one row lock statement and one WAL flush for all the
// outcomes that arrived while the previous group committed. What a crash
// can do is unchanged: an outcome whose group did not commit is not
// recorded, its caller has not returned, and the job's lease runs out into
// maybe-sent as it did when each outcome had a transaction of its own.
func (s *DB) Record(ctx context.Context, id string, leaseUntil time.Time, o store.Outcome) (*store.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckOutcome(id, o); err != nil {
		return nil, err
	}
	req := &recordReq{id: id, leaseUntil: leaseUntil, o: o, done: make(chan struct{})}
	select {
	case s.records <- req:
	case <-s.closing:
		return nil, fmt.Errorf("record attempt of %s: %w", id, errClosed)
	}
	<-req.done
	if req.err != nil {
		return nil, fmt.Errorf("record attempt of %s: %w", id, req.err)
	}
	if req.out.State == store.StateRetrying {
		s.wakeDispatchers(ctx)
	}
	return req.out, nil
}

// errClosed: the store was closed.
var errClosed = errors.New("store closed")

// recordReq is one Record call waiting for its group's commit.
type recordReq struct {
	id         string
	leaseUntil time.Time
	o          store.Outcome
	out        *store.Delivery
	err        error
	done       chan struct{}
}

// maxRecordGroup bounds the outcomes committed in one transaction.
const maxRecordGroup = 64

// recordWorkers are the recorders committing groups at the same time: while
// one group's commit waits for its WAL flush, the next group forms.
const recordWorkers = 2

// committer commits groups of requests from in until closing is closed:
// it waits for one, takes every other that is waiting (up to max), hands
// them to commit together, then tells each caller (done). The recorders
// and the ingesters are committers.
//
// Under load a group waits for company: when this committer's previous
// group held lingerFrom requests or more and it has not sat idle since
// (waited lingerIdle for a request), and busy says the processors are
// saturated (package cpubusy), a group smaller than the previous one waits
// up to linger (lingerMax) for more before it commits, and no longer than
// it takes to grow as large (so a few callers in turn do not each wait the
// whole linger). On a saturated machine each statement and commit costs
// beachd's and PostgreSQL's processors a share that a larger group divides
// among more envelopes; with processors to spare the wait would only
// lengthen every caller's turn, and a caller after an idle spell never
// waits.
func committer[R any](wg *sync.WaitGroup, closing <-chan struct{}, in <-chan R, max int, busy func() bool, linger time.Duration, commit func([]R), done func(R)) {
	defer wg.Done()
	group := make([]R, 0, max)
	prev := 0
	for {
		asked := time.Now()
		select {
		case <-closing:
			return
		case r := <-in:
			group = append(group[:0], r)
		}
		if time.Since(asked) > lingerIdle {
			prev = 0 // idle: the callers are few
		}
	more:
		for len(group) < max {
			select {
			case r := <-in:
				group = append(group, r)
			default:
				break more
			}
		}
		if prev >= lingerFrom && len(group) < min(max, prev) && busy() {
			t := time.NewTimer(linger)
		wait:
			for len(group) < min(max, prev) {
				select {
				case r := <-in:
					group = append(group, r)
				case <-t.C:
					break wait
				}
			}
			t.Stop()
		}
		prev = len(group)
		commit(group)
		for _, r := range group {
			done(r)
		}
	}
}

// The committers' wait for company under load (see committer), measured
// with beachd-bench -backends (docs/performance.md).
const (
	lingerFrom = 2
	lingerMax  = 5 * time.Millisecond
	lingerIdle = 100 * time.Millisecond
)

// recordGroup records the outcomes of group in one transaction, each
// request's result in its out or err. A job whose lease is not the
// caller's gets store.ErrLeaseLost without stopping the others; a group
// whose transaction fails is recorded again one outcome at a time, so one
// outcome's failure is its own.
func (s *DB) recordGroup(group []*recordReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One request per delivery in a group: a second outcome for the same
	// job (a caller's retry) is recorded after the first, on its own.
	seen := make(map[string]bool, len(group))
	var first, again []*recordReq
	for _, r := range group {
		if seen[r.id] {
			again = append(again, r)
			continue
		}
		seen[r.id] = true
		first = append(first, r)
	}
	// What recordClaimed could not write is written as before: its rows
	// locked and read again, in one transaction.
	switch first = s.recordClaimed(ctx, first); {
	case len(first) == 1:
		s.recordOne(ctx, first[0])
	case len(first) > 1:
		if err := s.tx(ctx, func(tx pgx.Tx) error { return s.recordTx(ctx, tx, first) }); err != nil {
			for _, r := range first {
				s.recordOne(ctx, r)
			}
		}
	}
	for _, r := range again {
		s.recordOne(ctx, r)
	}
}

// recordOne records r's outcome in a transaction of its own.
func (s *DB) recordOne(ctx context.Context, r *recordReq) {
	r.out, r.err = nil, nil
	if err := s.tx(ctx, func(tx pgx.Tx) error { return s.recordTx(ctx, tx, []*recordReq{r}) }); err != nil && r.err == nil {
		r.out, r.err = nil, err
	}
}

// recordTx locks the rows of rs's deliveries (in id order, as every
// statement that locks several does), applies each outcome whose lease
// holds, and writes the records, attempts and provider ids in one batch.
func (s *DB) recordTx(ctx context.Context, tx pgx.Tx, rs []*recordReq) error {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.id
		r.out, r.err = nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT id, doc, lease_until_ns FROM deliveries WHERE id = ANY($1) ORDER BY id FOR UPDATE`, s.planEach, ids)
	if err != nil {
		return err
	}
	type locked struct {
		doc   []byte
		lease *int64
	}
	found := make(map[string]locked, len(rs))
	for rows.Next() {
		var id string
		var l locked
		if err := rows.Scan(&id, &l.doc, &l.lease); err != nil {
			rows.Close()
			return err
		}
		found[id] = l
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	now := s.now()
	b := &pgx.Batch{}
	var w outcomeRows
	for _, r := range rs {
		l, ok := found[r.id]
		if !ok || l.lease == nil || !fromNanos(*l.lease).Equal(r.leaseUntil) {
			r.err = store.ErrLeaseLost
			continue
		}
		d, err := decodeDelivery(l.doc)
		if err != nil {
			r.err = err
			continue
		}
		store.ApplyOutcome(d, &r.o, now)
		if err := w.add(d, &r.o.Attempt); err != nil {
			r.err = err
			continue
		}
		if pids := store.OutcomeProviderIDs(&r.o); len(pids) > 0 {
			b.Queue(`INSERT INTO provider_ids (channel, pid, delivery_id) SELECT $1, pid, $2 FROM unnest($3::text[]) AS u (pid)
				ON CONFLICT (channel, pid) DO UPDATE SET delivery_id = EXCLUDED.delivery_id`, d.Channel, d.ID, pids)
		}
		r.out = d
	}
	if err := w.write(ctx, tx, s.planEach); err != nil {
		return err
	}
	if err := s.queueLateMessageTimers(ctx, tx, b, rs, now); err != nil {
		return err
	}
	return runBatch(ctx, tx, b)
}

// outcomeRows are the records and attempts of a group's outcomes, written
// by one statement whatever the group's size: two statements for each
// outcome cost PostgreSQL more than writing the rows did.
type outcomeRows struct {
	ids, states, docs, attempts []string
	dues                        []*int64
	updated                     []int64
	ns                          []int
}

// add appends the stored record d and its attempt a; a record that cannot
// be stored (updateCols) is an error and adds nothing.
func (w *outcomeRows) add(d *store.Delivery, a *store.Attempt) error {
	c, err := updateCols(d)
	if err != nil {
		return err
	}
	adoc, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode attempt: %w", err)
	}
	w.ids, w.states, w.dues = append(w.ids, d.ID), append(w.states, c.state), append(w.dues, c.due)
	w.updated, w.docs = append(w.updated, c.updated), append(w.docs, c.doc)
	w.ns, w.attempts = append(w.ns, a.N), append(w.attempts, string(adoc))
	return nil
}

// recordOutcomesSQL rewrites the records of a group's outcomes, each with
// the columns that follow it (updateDeliverySQL, for many rows), and
// stores their attempts (one a delivery; an attempt already stored under
// its number is replaced). The rows are locked already (recordTx).
const recordOutcomesSQL = `WITH w AS (UPDATE deliveries AS d SET state = u.state, due_ns = u.due_ns, lease_until_ns = NULL,
	lease_holder = NULL, updated_ns = u.updated_ns, doc = u.doc
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::json[]) AS u (id, state, due_ns, updated_ns, doc)
	WHERE d.id = u.id
	RETURNING d.id)
INSERT INTO attempts (delivery_id, n, doc)
	SELECT a.id, a.n, a.doc FROM unnest($1::text[], $6::int[], $7::json[]) AS a (id, n, doc) JOIN w ON w.id = a.id
	ON CONFLICT (delivery_id, n) DO UPDATE SET doc = EXCLUDED.doc`

// write runs recordOutcomesSQL for w's rows, or nothing for no rows. It is
// a statement of its own, not one of recordTx's batch: a batch runs in the
// connection's default mode (prepared statements, unless the DSN chose
// another), and this one is planned each time (mode: DB.planEach).
func (w *outcomeRows) write(ctx context.Context, tx pgx.Tx, mode pgx.QueryExecMode) error {
	if len(w.ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, recordOutcomesSQL, mode, w.ids, w.states, w.dues, w.updated, w.docs, w.ns, w.attempts)
	return err
}

// queueLateMessageTimers queues the timers of the approvals decided before
// the provider ids of rs were recorded (store.LateMessageTimers). The
// approvals' rows are read FOR SHARE: a decision (which locks its row FOR
// UPDATE) that commits first is seen, and one that has not waits for this
// transaction, so that the work after it reads the recorded provider id.
func (s *DB) queueLateMessageTimers(ctx context.Context, tx pgx.Tx, b *pgx.Batch, rs []*recordReq, now time.Time) error {
	var ids []string
	for _, r := range rs {
		if r.out != nil && r.o.FollowDecision && r.o.State == store.StateSent && r.out.ProviderID != "" {
			ids = append(ids, r.out.ApprovalIDs...)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT id, state FROM approvals WHERE id = ANY($1) ORDER BY id FOR SHARE`, s.planEach, ids)
	if err != nil {
		return fmt.Errorf("read the approvals of sent messages: %w", err)
	}
	decided := map[string]bool{}
	for rows.Next() {
		var id, state string
		if err := rows.Scan(&id, &state); err != nil {
			rows.Close()
			return err
		}
		decided[id] = state != store.ApprovalPending
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the approvals of sent messages: %w", err)
	}
	for _, r := range rs {
		if r.out == nil {
			continue
		}
		if err := queueTimers(b, store.LateMessageTimers(r.out, &r.o, decided, now)); err != nil {
			return err
		}
	}
	return nil
}

// Release puts a claimed job back in the queue without counting an attempt
// (the worker is shutting down, or a rate limit refused it), due at `at`.
func (s *DB) Release(ctx context.Context, id string, leaseUntil, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("release %s: %w: no due time", id, store.ErrBadState)
	}
	s.claimed.take(id)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		d, err := takeLease(ctx, tx, id, leaseUntil)
		if err != nil {
			return err
		}
		d.NextAttemptAt = at
		d.UpdatedAt = s.now()
		b := &pgx.Batch{}
		if err := queueUpdate(b, d); err != nil {
			return err
		}
		return runBatch(ctx, tx, b)
	})
	if err != nil {
		return fmt.Errorf("release %s: %w", id, err)
	}
	s.wakeDispatchers(ctx)
	return nil
}

// RequeueExpired ends every lease that ran out at or before `before`: the
// job is due again now, marked maybe-sent (its send may have reached the
// peer). Leases another transaction holds the row of (a Record, another
// replica's requeue) are left to it.
func (s *DB) RequeueExpired(ctx context.Context, before time.Time) (int, error) {
	now := s.now()
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n = 0
		// A lease ends when it runs out, or when the replica holding it
		// stopped renewing its liveness lease (it died): its jobs need not
		// wait for their own, longer leases.
		rows, err := tx.Query(ctx, `SELECT doc, NULL::bigint FROM deliveries d
			WHERE lease_until_ns IS NOT NULL AND (lease_until_ns <= $1 OR EXISTS (
				SELECT 1 FROM singleton_leases l WHERE l.name = $3 || d.lease_holder AND l.until_ns <= $2))
			ORDER BY id FOR UPDATE SKIP LOCKED`, clampNanos(before), nanos(now), store.LivenessLease(""))
		if err != nil {
			return err
		}
		ds, err := scanDeliveries(rows)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, d := range ds {
			// The lease ran out mid-send: the job may have reached its peer.
			d.MaybeSent = true
			d.NextAttemptAt = now
			d.UpdatedAt = now
			if err := queueUpdate(b, d); err != nil {
				return err
			}
		}
		if err := runBatch(ctx, tx, b); err != nil {
			return err
		}
		n = len(ds)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue expired leases: %w", err)
	}
	if n > 0 {
		s.wakeDispatchers(ctx)
	}
	return n, nil
}

// NextDue is the time of the earliest due job, if any: the earliest of
// each channel's first job. On an error it answers false.
func (s *DB) NextDue() (t time.Time, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var due *int64
	err := s.pool.QueryRow(ctx, dueChannelsCTE+`
		SELECT min((SELECT d.due_ns FROM deliveries d WHERE d.channel = ch.channel AND d.due_ns IS NOT NULL
			ORDER BY d.due_ns LIMIT 1)) FROM ch WHERE ch.channel IS NOT NULL`).Scan(&due)
	if err != nil || due == nil {
		return time.Time{}, false
	}
	return fromNanos(*due), true
}

// DeliveryByProviderID finds the delivery that a provider id belongs to:
// the id of any of its attempts or message parts, until it is pruned.
func (s *DB) DeliveryByProviderID(ctx context.Context, channel, pid string) (*store.Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `SELECT d.doc, d.lease_until_ns FROM provider_ids p
		JOIN deliveries d ON d.id = p.delivery_id WHERE p.channel = $1 AND p.pid = $2`, channel, pid))
	if err != nil {
		return nil, fmt.Errorf("delivery by provider id %s: %w", pid, err)
	}
	return d, nil
}

// SetProviderStatus records a status the provider reported after sending.
// It does not change the delivery's state.
func (s *DB) SetProviderStatus(ctx context.Context, id, status, detail string) (*store.Delivery, error) {
	d, _, err := s.UpdateProviderStatus(ctx, id, func(*store.Delivery) (string, string, bool) { return status, detail, true })
	return d, err
}

// UpdateProviderStatus is SetProviderStatus decided with the delivery's
// row locked: decide sees the delivery and returns the status and detail
// to record, or ok false to leave it. decide may be called more than once
// and must not have side effects.
func (s *DB) UpdateProviderStatus(ctx context.Context, id string, decide func(d *store.Delivery) (status, detail string, ok bool)) (*store.Delivery, bool, error) {
	var out *store.Delivery
	var changed bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out, changed = nil, false
		stored, lease, err := lockDelivery(ctx, tx, id)
		if err != nil {
			return err
		}
		shown := withLease(*stored, lease)
		status, detail, ok := decide(shown)
		if !ok {
			out = withLease(*stored, lease)
			return nil
		}
		stored.ProviderStatus = status
		if detail != "" {
			stored.LastError = detail
		}
		stored.UpdatedAt = s.now()
		doc, err := convDoc(stored)
		if err != nil {
			return fmt.Errorf("encode delivery: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE deliveries SET doc = $2, updated_ns = $3 WHERE id = $1`,
			id, string(doc), nanos(stored.UpdatedAt)); err != nil {
			return err
		}
		out, changed = withLease(*stored, lease), true
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("update provider status of %s: %w", id, err)
	}
	return out, changed, nil
}

// withLease is the stored record d as readers see it: sending while its
// lease (non-zero) is held.
func withLease(d store.Delivery, lease time.Time) *store.Delivery {
	if !lease.IsZero() {
		d.State, d.LeaseUntil = store.StateSending, lease
	}
	return &d
}

// Retry makes a dead delivery due again now (operator action). Its attempt
// count is kept; its lifetime starts again.
func (s *DB) Retry(ctx context.Context, id string) (*store.Delivery, error) {
	var out *store.Delivery
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		d, _, err := lockDelivery(ctx, tx, id)
		if err != nil {
			return err
		}
		if d.State != store.StateDead {
			return fmt.Errorf("%w: delivery is %s; only dead deliveries can be retried", store.ErrBadState, d.State)
		}
		now := s.now()
		d.State = store.StateQueued
		d.NextAttemptAt = now
		d.UpdatedAt = now
		d.DeadReason = ""
		if d.Extra == nil {
			d.Extra = map[string]string{}
		}
		d.Extra["retriedAt"] = now.UTC().Format(time.RFC3339Nano)
		b := &pgx.Batch{}
		if err := queueUpdate(b, d); err != nil {
			return err
		}
		if err := runBatch(ctx, tx, b); err != nil {
			return err
		}
		out = d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retry %s: %w", id, err)
	}
	s.wakeDispatchers(ctx)
	return out, nil
}

// ReleaseHeld queues now every held delivery of a conversation and returns
// how many it queued.
func (s *DB) ReleaseHeld(ctx context.Context, conversationID string) (int, error) {
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		n, err = s.releaseHeldTx(ctx, tx, conversationID, s.now())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("release held deliveries of %s: %w", conversationID, err)
	}
	return n, nil
}

// releaseHeldTx makes the conversation's held deliveries due now, in the
// caller's transaction (RecordInbound), and returns how many.
func (s *DB) releaseHeldTx(ctx context.Context, tx pgx.Tx, conversationID string, now time.Time) (int, error) {
	rows, err := tx.Query(ctx, `SELECT doc, NULL::bigint FROM deliveries WHERE state = 'held' AND conversation = $1
		ORDER BY id FOR UPDATE`, conversationID)
	if err != nil {
		return 0, fmt.Errorf("read held deliveries: %w", err)
	}
	held, err := scanDeliveries(rows)
	if err != nil {
		return 0, fmt.Errorf("read held deliveries: %w", err)
	}
	if len(held) == 0 {
		return 0, nil
	}
	b := &pgx.Batch{}
	for _, d := range held {
		d.State, d.NextAttemptAt, d.UpdatedAt = store.StateQueued, now, now
		if err := queueUpdate(b, d); err != nil {
			return 0, err
		}
	}
	s.queueWake(b)
	if err := runBatch(ctx, tx, b); err != nil {
		return 0, fmt.Errorf("queue held deliveries: %w", err)
	}
	return len(held), nil
}
