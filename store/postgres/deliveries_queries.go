package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
)

// Envelope returns an envelope record with its body as accepted.
func (s *DB) Envelope(ctx context.Context, id string) (*store.EnvelopeRecord, error) {
	var doc, body []byte
	err := s.pool.QueryRow(ctx, `SELECT doc, body FROM envelopes WHERE id = $1`, id).Scan(&doc, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("envelope %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("envelope %s: %w", id, err)
	}
	return envelopeRecord(id, doc, body)
}

// envelopeRecord is the record of an envelopes row: its doc, with the body
// as accepted.
func envelopeRecord(id string, doc, body []byte) (*store.EnvelopeRecord, error) {
	rec := new(store.EnvelopeRecord)
	if err := json.Unmarshal(doc, rec); err != nil {
		return nil, fmt.Errorf("envelope %s: %w: %v", id, store.ErrCorrupt, err)
	}
	if len(body) > 0 {
		rec.Envelope = body
	}
	return rec, nil
}

// Envelopes reads the records of ids in one query, in their order; an
// unknown id gives nil.
func (s *DB) Envelopes(ctx context.Context, ids []string) ([]*store.EnvelopeRecord, error) {
	out := make([]*store.EnvelopeRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	at := make(map[string][]int, len(ids))
	for i, id := range ids {
		at[id] = append(at[id], i)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, doc, body FROM envelopes WHERE id = ANY($1)`, s.planEach, ids)
	if err != nil {
		return nil, fmt.Errorf("envelopes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var doc, body []byte
		if err := rows.Scan(&id, &doc, &body); err != nil {
			return nil, fmt.Errorf("envelopes: %w", err)
		}
		rec, err := envelopeRecord(id, doc, body)
		if err != nil {
			return nil, err
		}
		for _, i := range at[id] {
			out[i] = rec
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("envelopes: %w", err)
	}
	return out, nil
}

// Delivery returns one delivery.
func (s *DB) Delivery(ctx context.Context, id string) (*store.Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("delivery %s: %w", id, err)
	}
	return d, nil
}

// Attempts lists a delivery's attempts in order.
func (s *DB) Attempts(ctx context.Context, id string) ([]store.Attempt, error) {
	rows, err := s.pool.Query(ctx, `SELECT doc FROM attempts WHERE delivery_id = $1 ORDER BY n`, id)
	if err != nil {
		return nil, fmt.Errorf("attempts of %s: %w", id, err)
	}
	defer rows.Close()
	var out []store.Attempt
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("attempts of %s: %w", id, err)
		}
		var a store.Attempt
		if err := json.Unmarshal(doc, &a); err != nil {
			return nil, fmt.Errorf("attempts of %s: %w: %v", id, store.ErrCorrupt, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attempts of %s: %w", id, err)
	}
	return out, nil
}

// ListDeliveries lists deliveries in a state (all states when st is ""),
// oldest first, starting after the id `after`, at most limit (1–1000). A
// job in flight is listed as sending, not under its stored state.
func (s *DB) ListDeliveries(ctx context.Context, st store.State, after string, limit int) ([]*store.Delivery, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	q, args := `SELECT `+deliveryCols+` FROM deliveries WHERE id > $1 ORDER BY id LIMIT $2`, []any{after, limit}
	if st != "" {
		q = `SELECT ` + deliveryCols + ` FROM deliveries WHERE state = $3 AND id > $1 ORDER BY state, id LIMIT $2`
		args = append(args, string(st))
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	out, err := scanDeliveries(rows)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return out, nil
}

// CountByState counts deliveries per state; jobs in flight count as
// sending. States without deliveries are left out.
func (s *DB) CountByState(ctx context.Context) (map[store.State]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM deliveries GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	defer rows.Close()
	out := map[store.State]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count deliveries: %w", err)
		}
		out[store.State(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	return out, nil
}

// QueryDeliveries lists the deliveries matching f, newest first, at most
// limit (1–1000). The filter's columns and Before narrow the read in the
// database; every row read is then matched by f.Match, and at most
// store.MaxScan rows are read. More reports whether matches may be
// left (at limit or at MaxScan).
func (s *DB) QueryDeliveries(ctx context.Context, f store.DeliveryFilter, limit int) (out []*store.Delivery, more bool, err error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.Before != "" {
		add("id < ?", f.Before)
	}
	if f.State != "" {
		add("state = ?", string(f.State))
	}
	if f.Channel != "" {
		add("channel = ?", f.Channel)
	}
	if f.Agent != "" {
		add("agent = ?", f.Agent)
	}
	if !f.Since.IsZero() {
		add("created_ns >= ?", clampNanos(f.Since))
	}
	if !f.Until.IsZero() {
		add("created_ns < ?", clampNanos(f.Until))
	}
	q := `SELECT ` + deliveryCols + ` FROM deliveries`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, store.MaxScan+1)
	q += ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("query deliveries: %w", err)
	}
	defer rows.Close()
	for scanned := 0; rows.Next(); {
		if scanned++; scanned > store.MaxScan {
			more = true
			break
		}
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, false, fmt.Errorf("query deliveries: %w", err)
		}
		if !f.Match(d) {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		out = append(out, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("query deliveries: %w", err)
	}
	return out, more, nil
}

// DeliveryStats counts deliveries by state and channel and the rates of the
// last hour and day, as of now, over the newest store.MaxScan deliveries.
func (s *DB) DeliveryStats(ctx context.Context, now time.Time) (*store.DeliveryStats, error) {
	c := store.NewStatsCounter(now)
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryCols+` FROM deliveries ORDER BY id DESC LIMIT $1`, store.MaxScan+1)
	if err != nil {
		return nil, fmt.Errorf("delivery stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() && !c.Full() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("delivery stats: %w", err)
		}
		c.Add(d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("delivery stats: %w", err)
	}
	return c.Stats(), nil
}

// DeadSince lists the ids of dead deliveries that died at or after since
// (their last update), optionally of one channel, in id order, at most
// store.MaxBulkRetry; more reports that there were more.
func (s *DB) DeadSince(ctx context.Context, since time.Time, channel string) (ids []string, more bool, err error) {
	q, args := `SELECT id FROM deliveries WHERE state = 'dead' AND updated_ns >= $1`, []any{clampNanos(since), store.MaxBulkRetry + 1}
	if channel != "" {
		q += ` AND channel = $3`
		args = append(args, channel)
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY state, id LIMIT $2`, args...)
	if err != nil {
		return nil, false, fmt.Errorf("dead deliveries: %w", err)
	}
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, fmt.Errorf("dead deliveries: %w", err)
	}
	if len(ids) > store.MaxBulkRetry {
		return ids[:store.MaxBulkRetry], true, nil
	}
	return ids, false, nil
}

// RetryDeadSince makes due again every dead delivery DeadSince selects and
// returns how many it retried. A delivery retried by someone else in the
// meantime is skipped, not an error.
func (s *DB) RetryDeadSince(ctx context.Context, since time.Time, channel string) (int, error) {
	ids, _, err := s.DeadSince(ctx, since, channel)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if _, err := s.Retry(ctx, id); err != nil {
			if errors.Is(err, store.ErrBadState) || errors.Is(err, store.ErrNotFound) {
				continue
			}
			return n, err
		}
		n++
	}
	return n, nil
}

// pruneCandidatesSQL finds up to $3 envelopes created before $1, after the
// id $2 and before the id $4, whose deliveries are all sent or dead.
const pruneCandidatesSQL = `SELECT e.id FROM envelopes e
	WHERE e.created_ns < $1 AND e.id > $2 AND e.id < $4 AND NOT EXISTS (
		SELECT 1 FROM deliveries d WHERE d.envelope_id = e.id AND d.state NOT IN ('sent', 'dead'))
	ORDER BY e.id LIMIT $3`

// idBound is an id that sorts after every envelope id made before t: ids
// begin with their creation's milliseconds, so that Prune's walk in id
// order ends where the envelopes young enough to keep begin.
func idBound(t time.Time) string {
	if t.After(maxNanosTime) {
		return "env_~" // after every id
	}
	return store.NewIDAt(t.Add(time.Millisecond), bytes.NewReader(make([]byte, 10)), "env_")
}

// Prune removes finished envelopes older than before: those whose
// deliveries are all sent or dead, with those deliveries, their attempts
// and provider ids. An envelope with a delivery still queued, held,
// sending or retrying is kept whatever its age. Each call removes at most
// max envelopes in one transaction; call it until it returns 0.
//
// The candidates' deliveries are locked and looked at again before the
// envelopes go, so that a delivery an operator retries meanwhile is kept.
func (s *DB) Prune(ctx context.Context, before time.Time, max int) (int, error) {
	if max <= 0 {
		max = 1000
	}
	n := 0
	bound := idBound(before)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n = 0
		for after := ""; ; {
			rows, err := tx.Query(ctx, pruneCandidatesSQL, clampNanos(before), after, max, bound)
			if err != nil {
				return err
			}
			cands, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(cands) == 0 {
				return err
			}
			after = cands[len(cands)-1]
			if n, err = s.pruneEnvelopes(ctx, tx, cands); err != nil || n > 0 {
				return err
			}
		}
	})
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	return n, nil
}

// pruneEnvelopes removes those of the envelopes ids whose deliveries are
// still all finished once locked.
func (s *DB) pruneEnvelopes(ctx context.Context, tx pgx.Tx, ids []string) (int, error) {
	rows, err := tx.Query(ctx, `SELECT envelope_id, state FROM deliveries WHERE envelope_id = ANY($1) ORDER BY id FOR UPDATE`, s.planEach, ids)
	if err != nil {
		return 0, err
	}
	unfinished := map[string]bool{}
	var envID, state string
	_, err = pgx.ForEachRow(rows, []any{&envID, &state}, func() error {
		if state != string(store.StateSent) && state != string(store.StateDead) {
			unfinished[envID] = true
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	doomed := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return unfinished[id] })
	if len(doomed) == 0 {
		return 0, nil
	}
	tag, err := tx.Exec(ctx, `DELETE FROM envelopes WHERE id = ANY($1)`, s.planEach, doomed)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// checkDeliveries reports the first broken invariant of the outbox: a
// delivery whose record does not decode or whose columns disagree with its
// record and lease (checkDeliveryRow), or one its envelope does not list,
// or an id an envelope lists without its delivery.
func (s *DB) checkDeliveries(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT id, envelope_id, channel, recipient, agent, state, due_ns,
		lease_until_ns, created_ns, updated_ns, conversation, doc FROM deliveries ORDER BY id`)
	if err != nil {
		return fmt.Errorf("check deliveries: %w", err)
	}
	var r deliveryRow
	if _, err := pgx.ForEachRow(rows, []any{&r.id, &r.envelopeID, &r.channel, &r.to, &r.agent, &r.state, &r.due,
		&r.lease, &r.created, &r.updated, &r.conversation, &r.doc}, r.check); err != nil {
		return fmt.Errorf("check deliveries: %w", err)
	}
	checks := []struct{ what, sql string }{
		{"not listed by its envelope", `SELECT d.id FROM deliveries d JOIN envelopes e ON e.id = d.envelope_id
			WHERE NOT EXISTS (SELECT 1 FROM json_array_elements_text(coalesce(e.doc->'deliveryIds', '[]')) AS x (id) WHERE x.id = d.id) LIMIT 1`},
		{"listed by its envelope but missing", `SELECT x.id FROM envelopes e
			CROSS JOIN LATERAL json_array_elements_text(coalesce(e.doc->'deliveryIds', '[]')) AS x (id)
			WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = x.id) LIMIT 1`},
	}
	for _, c := range checks {
		var id string
		err := s.pool.QueryRow(ctx, c.sql).Scan(&id)
		switch {
		case err == nil:
			return fmt.Errorf("check deliveries: delivery %s: %s", id, c.what)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("check deliveries: %w", err)
		}
	}
	return nil
}

// deliveryRow is every column of a deliveries row.
type deliveryRow struct {
	id, envelopeID, channel, to, agent, state, conversation string
	due, lease                                              *int64
	created, updated                                        int64
	doc                                                     []byte
}

// check reports how the row disagrees with its record and lease: the
// record must decode, name the row's id, envelope, channel, recipient,
// agent, conversation and times, never be in state sending, and be due at
// its NextAttemptAt exactly when it is queued or retrying and not leased.
func (r *deliveryRow) check() error {
	d, err := decodeDelivery(r.doc)
	if err != nil {
		return fmt.Errorf("delivery %s: %w", r.id, err)
	}
	switch {
	case d.ID != r.id || d.EnvelopeID != r.envelopeID || d.Channel != r.channel || d.To != r.to ||
		d.Agent != r.agent || conversationOf(d) != r.conversation:
		return fmt.Errorf("delivery %s: its record (%s of %s, %s to %q) does not match its row", r.id, d.ID, d.EnvelopeID, d.Channel, d.To)
	case nanos(d.CreatedAt) != r.created || nanos(d.UpdatedAt) != r.updated:
		return fmt.Errorf("delivery %s: its record's times do not match its row", r.id)
	case d.State == store.StateSending || !d.State.Valid():
		return fmt.Errorf("delivery %s is stored as %q (a job in flight keeps its stored state and holds a lease)", r.id, d.State)
	}
	due := d.State == store.StateQueued || d.State == store.StateRetrying
	switch {
	case r.lease != nil && (!due || r.state != string(store.StateSending) || r.due != nil):
		return fmt.Errorf("delivery %s is %s, leased, in state %s with due %v", r.id, d.State, r.state, r.due)
	case r.lease == nil && r.state != string(d.State):
		return fmt.Errorf("delivery %s is %s with state %s", r.id, d.State, r.state)
	case r.lease == nil && due && (r.due == nil || *r.due != clampNanos(d.NextAttemptAt)):
		return fmt.Errorf("delivery %s is %s, not due at its next attempt %v", r.id, d.State, d.NextAttemptAt)
	case r.lease == nil && !due && r.due != nil:
		return fmt.Errorf("delivery %s is %s and due", r.id, d.State)
	}
	return nil
}
