package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// deliveryCols are what every read of a delivery selects: the stored
// record and its lease (scanDelivery).
const deliveryCols = `doc, lease_until_ns`

// scanDelivery reads a row of deliveryCols: the stored record, shown as
// sending with its lease when the job is in flight. No row is
// store.ErrNotFound.
func scanDelivery(row pgx.Row) (*store.Delivery, error) {
	var doc []byte
	var lease *int64
	if err := row.Scan(&doc, &lease); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		return nil, err
	}
	d, err := decodeDelivery(doc)
	if err != nil {
		return nil, err
	}
	if lease != nil {
		d.State, d.LeaseUntil = store.StateSending, fromNanos(*lease)
	}
	return d, nil
}

// decodeDelivery reads a stored delivery record.
func decodeDelivery(doc []byte) (*store.Delivery, error) {
	d := &store.Delivery{}
	if err := json.Unmarshal(doc, d); err != nil {
		return nil, fmt.Errorf("%w: delivery record: %v", store.ErrCorrupt, err)
	}
	return d, nil
}

// scanDeliveries reads every row of rows (deliveryCols).
func scanDeliveries(rows pgx.Rows) ([]*store.Delivery, error) {
	defer rows.Close()
	var out []*store.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// lockDelivery reads the stored record of the delivery id and its lease
// (zero: none), locking the row until tx ends.
func lockDelivery(ctx context.Context, tx pgx.Tx, id string) (*store.Delivery, time.Time, error) {
	var doc []byte
	var lease *int64
	err := tx.QueryRow(ctx, `SELECT doc, lease_until_ns FROM deliveries WHERE id = $1 FOR UPDATE`, id).Scan(&doc, &lease)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, store.ErrNotFound
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	d, err := decodeDelivery(doc)
	if err != nil {
		return nil, time.Time{}, err
	}
	var until time.Time
	if lease != nil {
		until = fromNanos(*lease)
	}
	return d, until, nil
}

// takeLease locks the delivery id and returns its stored record if its
// lease is the one ending at leaseUntil; otherwise store.ErrLeaseLost.
func takeLease(ctx context.Context, tx pgx.Tx, id string, leaseUntil time.Time) (*store.Delivery, error) {
	d, until, err := lockDelivery(ctx, tx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, store.ErrLeaseLost
	case err != nil:
		return nil, err
	case until.IsZero() || !until.Equal(leaseUntil):
		return nil, store.ErrLeaseLost
	}
	return d, nil
}

// updateDeliverySQL rewrites a delivery's record and the columns that
// follow it (updateArgs).
const updateDeliverySQL = `UPDATE deliveries SET state = $2, due_ns = $3, lease_until_ns = NULL, lease_holder = NULL,
	updated_ns = $4, doc = $5 WHERE id = $1`

// updateArgs are updateDeliverySQL's arguments for the stored record d of
// a job not in flight (updateCols).
func updateArgs(d *store.Delivery) ([]any, error) {
	c, err := updateCols(d)
	if err != nil {
		return nil, err
	}
	return []any{d.ID, c.state, c.due, c.updated, c.doc}, nil
}

// updateRow is what a rewrite of a delivery's record stores besides its id.
type updateRow struct {
	state, doc string
	due        *int64
	updated    int64
}

// updateCols is the rewrite of the stored record d of a job not in
// flight. Like the embedded store it refuses state sending (a job in
// flight is its stored record plus a lease), and clears the next attempt
// time of a job that is not due.
func updateCols(d *store.Delivery) (updateRow, error) {
	if d.State == store.StateSending || !d.State.Valid() {
		return updateRow{}, fmt.Errorf("%w: cannot store a delivery in state %q", store.ErrBadState, d.State)
	}
	due := dueNanos(d)
	doc, err := convDoc(d)
	if err != nil {
		return updateRow{}, fmt.Errorf("encode delivery %s: %w", d.ID, err)
	}
	return updateRow{state: string(d.State), doc: string(doc), due: due, updated: nanos(d.UpdatedAt)}, nil
}

// dueNanos is when the job d is due (nil: not due), clearing
// d.NextAttemptAt when d is in a state that is never due.
func dueNanos(d *store.Delivery) *int64 {
	if d.State == store.StateQueued || d.State == store.StateRetrying {
		n := clampNanos(d.NextAttemptAt)
		return &n
	}
	d.NextAttemptAt = time.Time{}
	return nil
}

// The times nanoseconds since the epoch reach (years 1677 to 2262).
var (
	minNanosTime = time.Unix(0, math.MinInt64)
	maxNanosTime = time.Unix(0, math.MaxInt64)
)

// clampNanos is t in nanoseconds, a time beyond their range (the zero
// time, a bound far in the future) as the nearest they reach: a job due in
// the year 3000 must not wrap round to being due now.
func clampNanos(t time.Time) int64 {
	switch {
	case t.Before(minNanosTime):
		return math.MinInt64
	case t.After(maxNanosTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// notifySQL tells every replica that work of a topic is due.
const notifySQL = `SELECT pg_notify($1, $2)`

// queueWake queues on b, in a transaction that makes deliveries due, the
// wake-up of the replicas' dispatchers at its commit. It is for the
// transactions of others' calls (RecordInbound); the outbox's own calls
// use wakeDispatchers.
func (s *DB) queueWake(b *pgx.Batch) { b.Queue(notifySQL, s.channel, store.WakeDeliveries) }

// wakeDispatchers tells every replica, after the commit that made
// deliveries due, that they are. A NOTIFY inside the transaction would
// serialize the commits of all notifying transactions, each one's WAL
// flush included (PostgreSQL holds a database-wide lock from a notifying
// transaction's pre-commit to its end): ingests from many callers would
// commit one at a time. So the wake-up is a statement of its own, and the
// notifier coalesces them: one NOTIFY in flight at a time, and one more
// after it for every request that came while it ran, so each commit is
// followed by a NOTIFY that starts after it, and a thousand ingests a
// second cost a few NOTIFYs, not a thousand autocommits. A wake-up lost
// (the process ends between the two, or the connection fails) costs the
// other replicas one poll interval, not a job: this process's own
// dispatcher is woken by its caller.
func (s *DB) wakeDispatchers(context.Context) {
	select {
	case s.wakeReq <- struct{}{}:
	default: // one is already waiting; it starts after this commit
	}
}

// notifyGap is the least time between two of a process's wake-up
// NOTIFYs. Each one costs every listening replica's backend a transaction
// and its dispatcher a claim; the process's own dispatcher is woken at
// once by its caller, so the gap only delays the other replicas' help.
const notifyGap = 50 * time.Millisecond

// notifier sends the wake-ups wakeDispatchers asks for until ctx ends, at
// most one a notifyGap.
func (s *DB) notifier(ctx context.Context) {
	defer close(s.notifierDone)
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wakeReq:
		}
		select {
		case <-ctx.Done():
			return
		case <-gap.C:
		}
		gap.Reset(notifyGap)
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := s.pool.Exec(nctx, notifySQL, s.channel, store.WakeDeliveries); err != nil && ctx.Err() == nil {
			s.log.Warn("wake the replicas' dispatchers", "err", err)
		}
		cancel()
	}
}

// queueUpdate queues the rewrite of the stored record d on b.
func queueUpdate(b *pgx.Batch, d *store.Delivery) error {
	args, err := updateArgs(d)
	if err != nil {
		return err
	}
	b.Queue(updateDeliverySQL, args...)
	return nil
}

// runBatch sends b in tx and reads every result.
func runBatch(ctx context.Context, tx pgx.Tx, b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// conversationOf is the conversation d belongs to (empty for none).
func conversationOf(d *store.Delivery) string { return d.Extra[envelope.ExtraConversation] }

// validChannelName: printable ASCII without spaces, at most 64 bytes, as
// every channel's name is (the embedded store's rule).
func validChannelName(ch string) bool {
	if len(ch) == 0 || len(ch) > 64 {
		return false
	}
	for i := 0; i < len(ch); i++ {
		if ch[i] < 0x21 || ch[i] > 0x7e {
			return false
		}
	}
	return true
}
