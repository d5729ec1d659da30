package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// approvalMaxKey bounds approval ids and token hashes, as on the embedded
// store.
const approvalMaxKey = 1024

// Approval returns the approval with that id.
func (s *DB) Approval(ctx context.Context, id string) (*store.Approval, error) {
	var doc []byte
	err := s.pool.QueryRow(ctx, `SELECT doc FROM approvals WHERE id = $1`, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("approval %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("approval %q: %w", id, err)
	}
	return decodeApproval(doc)
}

// ListApprovals lists approvals in id order after the cursor `after`,
// optionally only those in state st.
func (s *DB) ListApprovals(ctx context.Context, st, after string, limit int) ([]*store.Approval, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT doc FROM approvals
		WHERE id > $1 AND ($2 = '' OR state = $2) ORDER BY id LIMIT $3`, after, st, limit)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	docs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	out := make([]*store.Approval, 0, len(docs))
	for _, doc := range docs {
		a, err := decodeApproval(doc)
		if err != nil {
			return nil, fmt.Errorf("list approvals: %w", err)
		}
		out = append(out, a)
	}
	return out, nil
}

// ApprovalAudit returns an approval's audit trail, oldest first.
func (s *DB) ApprovalAudit(ctx context.Context, id string) ([]store.AuditEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT doc FROM approval_audit WHERE approval_id = $1 ORDER BY at_ns, seq`, id)
	if err != nil {
		return nil, fmt.Errorf("audit of approval %q: %w", id, err)
	}
	docs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("audit of approval %q: %w", id, err)
	}
	var out []store.AuditEntry
	for _, doc := range docs {
		var e store.AuditEntry
		if err := json.Unmarshal(doc, &e); err != nil {
			return nil, fmt.Errorf("audit of approval %q: %w: %v", id, store.ErrCorrupt, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// TokenBinding resolves a token hash. ErrNotFound when unknown.
func (s *DB) TokenBinding(ctx context.Context, hash string) (*store.TokenBinding, error) {
	tb, err := tokenBindingTx(ctx, s.pool, hash)
	if err != nil {
		return nil, fmt.Errorf("token binding: %w", err)
	}
	return tb, nil
}

// TokenExists reports whether a token hash is bound (collision checks at
// minting time).
func (s *DB) TokenExists(ctx context.Context, hash string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM approval_tokens WHERE hash = $1)`, hash).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("token exists: %w", err)
	}
	return ok, nil
}

// InboundSeen reports whether (channel, message id) was processed.
func (s *DB) InboundSeen(ctx context.Context, channel, msgID string) (bool, error) {
	if msgID == "" {
		return false, nil
	}
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM inbound_seen WHERE channel = $1 AND msg_id = $2)`,
		channel, msgID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("inbound seen: %w", err)
	}
	return ok, nil
}

// markInboundTx records (channel, msgID); ErrDuplicateInbound when it was
// recorded before, by this or another replica (the primary key decides).
// An empty msgID is not recorded.
func markInboundTx(ctx context.Context, tx pgx.Tx, channel, msgID string, now time.Time) error {
	if msgID == "" {
		return nil
	}
	tag, err := tx.Exec(ctx, `INSERT INTO inbound_seen (channel, msg_id, at_ns) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, channel, msgID, nanos(now))
	if err != nil {
		return fmt.Errorf("record inbound message id: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrDuplicateInbound
	}
	return nil
}

// Note records an event that changes no approval state (a wrong sender, a
// quarantined reply, a message not understood) and marks the inbound
// message id as processed, in one transaction. approvalID may be empty (an
// unknown token): then only the message id is recorded. events (a vote
// that had no effect) are appended to the approval's trail in the same
// transaction. ErrDuplicateInbound when the message was processed before.
func (s *DB) Note(ctx context.Context, e store.AuditEntry, events ...store.ApprovalEvent) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := markInboundTx(ctx, tx, e.Channel, e.MessageID, e.At); err != nil {
			return err
		}
		if e.ApprovalID == "" {
			return nil
		}
		if len(events) > 0 {
			if err := approvalExistsTx(ctx, tx, e.ApprovalID); err != nil {
				return err
			}
			if _, err := appendEventsTx(ctx, tx, e.ApprovalID, events, e.At); err != nil {
				return err
			}
		}
		return putAuditTx(ctx, tx, e)
	})
	if err != nil && !errors.Is(err, store.ErrDuplicateInbound) {
		return fmt.Errorf("note approval event: %w", err)
	}
	return err
}

// Decide applies d in one transaction: the approval moves from pending to
// d.State, its code guards go, the inbound message id is recorded, an
// audit entry is written, the vote and the decision are appended to the
// approval's trail and the injection job is queued, due at once (or
// already claimed for d.ClaimFor). The approval's row lock decides between
// concurrent decisions on any replica: the first to take it wins, the
// others find it decided, are answered the approval as it is and
// ErrAlreadyDecided (an "already-decided" audit entry is written).
// ErrDuplicateInbound when the message was processed before. The injection
// job is returned too (nil for void).
func (s *DB) Decide(ctx context.Context, d store.Decision) (*store.Approval, *store.Injection, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	var out *store.Approval
	var job *store.Injection
	var stop int
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, job, stop, err = s.decideTx(ctx, tx, d)
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrDuplicateInbound) || errors.Is(err, store.ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("decide approval: %w", err)
	}
	switch stop {
	case stopAlready:
		return out, nil, store.ErrAlreadyDecided
	case store.VoteSecond:
		return out, nil, store.ErrSecondVote
	}
	return out, job, nil
}

// stopAlready is decideTx's stop for an approval no longer pending.
const stopAlready = -1

// decideTx is Decide's transaction. stop is stopAlready for an approval
// that was no longer pending: it is returned as it is and nothing else
// changes but the trail, the audit entry and the message id; for a vote
// on an approval with a quorum, it is store.VoteCounted when the vote was
// counted and decided nothing, store.VoteSecond when the person had voted.
func (s *DB) decideTx(ctx context.Context, tx pgx.Tx, d store.Decision) (a *store.Approval, job *store.Injection, stop int, err error) {
	if err := markInboundTx(ctx, tx, d.Channel, d.MessageID, d.At); err != nil {
		return nil, nil, 0, err
	}
	a, err = lockApprovalTx(ctx, tx, d.ApprovalID)
	if err != nil {
		return nil, nil, 0, err
	}
	if a.State != store.ApprovalPending {
		if d.Vote != nil {
			if _, err := appendEventsTx(ctx, tx, a.ID, []store.ApprovalEvent{store.VoteIgnored(*d.Vote, a)}, d.At); err != nil {
				return nil, nil, 0, err
			}
		}
		err := putAuditTx(ctx, tx, store.AuditEntry{At: d.At, ApprovalID: a.ID, Event: "already-decided", Channel: d.Channel,
			Actor: d.DecidedBy, MessageID: d.MessageID, Decision: d.State,
			Detail: "approval is " + a.State + " since " + a.DecidedAt.UTC().Format(time.RFC3339)})
		return a, nil, stopAlready, err
	}
	if a.Quorum > 0 && d.Person != "" && (d.State == store.ApprovalGranted || d.State == store.ApprovalDenied) {
		switch v := store.CountVote(a, &d); v {
		case store.VoteSecond, store.VoteCounted:
			ev, event := store.VoteCountedEvent(store.VoteEventOf(d), a), "counted"
			if v == store.VoteSecond {
				ev, event = store.VoteSecondEvent(store.VoteEventOf(d)), store.WhySecondVote
			} else if err := updateApprovalTx(ctx, tx, a); err != nil {
				return nil, nil, 0, err
			}
			if _, err := appendEventsTx(ctx, tx, a.ID, []store.ApprovalEvent{ev}, d.At); err != nil {
				return nil, nil, 0, err
			}
			return a, nil, v, putAuditTx(ctx, tx, store.AuditEntry{At: d.At, ApprovalID: a.ID, Event: event, Channel: d.Channel,
				Actor: d.Person, MessageID: d.MessageID, Decision: d.State})
		}
	}
	if err := deleteCodeGuardsTx(ctx, tx, a); err != nil {
		return nil, nil, 0, err
	}
	a.State, a.Reason, a.DecidedBy, a.Channel, a.MessageID, a.DecidedAt = d.State, d.Reason, d.DecidedBy, d.Channel, d.MessageID, d.At
	if d.State != store.ApprovalVoid {
		if d.InjectionID == "" {
			return nil, nil, 0, errors.New("no injection id")
		}
		a.InjectionID = d.InjectionID
		job = newInjection(a, d)
		if err := insertInjectionTx(ctx, tx, job, s.holder); err != nil {
			return nil, nil, 0, err
		}
		if err := s.notify(ctx, tx, store.WakeInjections); err != nil {
			return nil, nil, 0, err
		}
	}
	if err := updateApprovalTx(ctx, tx, a); err != nil {
		return nil, nil, 0, err
	}
	events := []store.ApprovalEvent{store.DecisionEvent(d)}
	if d.Vote != nil {
		events = []store.ApprovalEvent{store.VoteDecided(*d.Vote), events[0]}
	}
	if _, err := appendEventsTx(ctx, tx, a.ID, events, d.At); err != nil {
		return nil, nil, 0, err
	}
	if !d.FollowUpAt.IsZero() {
		b := &pgx.Batch{}
		if err := queueTimers(b, []store.ApprovalTimer{{ApprovalID: a.ID, Kind: store.TimerDecided, Due: d.FollowUpAt}}); err != nil {
			return nil, nil, 0, err
		}
		if err := runBatch(ctx, tx, b); err != nil {
			return nil, nil, 0, fmt.Errorf("store the follow-up of %s: %w", a.ID, err)
		}
	}
	err = putAuditTx(ctx, tx, store.AuditEntry{At: d.At, ApprovalID: a.ID, Event: decisionEvent(d.State), Channel: d.Channel,
		Actor: d.DecidedBy, MessageID: d.MessageID, Decision: d.State, Detail: d.Reason})
	return a, job, 0, err
}

// decisionEvent is the audit event of a decision to state.
func decisionEvent(state string) string {
	switch state {
	case store.ApprovalExpired:
		return "expired"
	case store.ApprovalVoid:
		return "voided"
	}
	return "decided"
}

// newInjection is the job that delivers decision d of approval a (a
// already decided): due at once, or claimed for d.ClaimFor with its first
// attempt counted.
func newInjection(a *store.Approval, d store.Decision) *store.Injection {
	inj := &store.Injection{ID: d.InjectionID, ApprovalID: a.ID, Agent: a.Agent, Session: a.Session, Turn: a.Turn,
		Response: envelope.ApprovalResponse{ApprovalID: a.ID, Decision: a.Decision(), Reason: d.Reason,
			DecidedBy: d.DecidedBy, DecidedAt: d.At},
		State: store.InjectionPending, CreatedAt: d.At, UpdatedAt: d.At, NextAt: d.At}
	if d.ClaimFor > 0 {
		inj.Attempts, inj.Claims, inj.NextAt, inj.LeasedUntil = 1, 1, d.At.Add(d.ClaimFor), d.At.Add(d.ClaimFor)
	}
	return inj
}

// lockApprovalTx reads approval id and locks its row until the
// transaction ends.
func lockApprovalTx(ctx context.Context, tx pgx.Tx, id string) (*store.Approval, error) {
	var doc []byte
	err := tx.QueryRow(ctx, `SELECT doc FROM approvals WHERE id = $1 FOR UPDATE`, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("approval %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("lock approval %q: %w", id, err)
	}
	return decodeApproval(doc)
}

// approvalExpiry is the expires_ns column of a: its expiry while pending.
func approvalExpiry(a *store.Approval) *int64 {
	if a.State != store.ApprovalPending || a.ExpiresAt.IsZero() {
		return nil
	}
	n := nanos(a.ExpiresAt)
	return &n
}

// updateApprovalTx writes a over its row.
func updateApprovalTx(ctx context.Context, tx pgx.Tx, a *store.Approval) error {
	doc, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode approval %s: %w", a.ID, err)
	}
	_, err = tx.Exec(ctx, `UPDATE approvals SET state = $2, expires_ns = $3, doc = $4 WHERE id = $1`,
		a.ID, a.State, approvalExpiry(a), doc)
	if err != nil {
		return fmt.Errorf("write approval %s: %w", a.ID, err)
	}
	return nil
}

func decodeApproval(doc []byte) (*store.Approval, error) {
	var a store.Approval
	if err := json.Unmarshal(doc, &a); err != nil {
		return nil, fmt.Errorf("decode approval: %w: %v", store.ErrCorrupt, err)
	}
	return &a, nil
}

// tokenQuerier is what tokenBindingTx reads with: the pool or a
// transaction.
type tokenQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// tokenBindingTx reads the binding of a token hash; ErrNotFound when
// unknown.
func tokenBindingTx(ctx context.Context, q tokenQuerier, hash string) (*store.TokenBinding, error) {
	var doc []byte
	err := q.QueryRow(ctx, `SELECT doc FROM approval_tokens WHERE hash = $1`, hash).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read token binding: %w", err)
	}
	var tb store.TokenBinding
	if err := json.Unmarshal(doc, &tb); err != nil {
		return nil, fmt.Errorf("decode token binding: %w: %v", store.ErrCorrupt, err)
	}
	return &tb, nil
}

// putAuditTx appends e to its approval's audit trail.
func putAuditTx(ctx context.Context, tx pgx.Tx, e store.AuditEntry) error {
	doc, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit entry: %w", err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO approval_audit (approval_id, at_ns, doc) VALUES ($1, $2, $3)`,
		e.ApprovalID, nanos(e.At), doc)
	if err != nil {
		return fmt.Errorf("write audit entry %s of %s: %w", e.Event, e.ApprovalID, err)
	}
	return nil
}

// DueExpiries returns the ids of pending approvals whose expiry is at or
// before now, oldest first, at most max.
func (s *DB) DueExpiries(ctx context.Context, now time.Time, max int) ([]string, error) {
	if max <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM approvals WHERE expires_ns <= $1
		ORDER BY expires_ns, id LIMIT $2`, nanos(now), max)
	if err != nil {
		return nil, fmt.Errorf("due expiries: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("due expiries: %w", err)
	}
	return ids, nil
}

// NextExpiry is the earliest pending expiry, if any.
func (s *DB) NextExpiry() (time.Time, bool) {
	return s.firstNanos(`SELECT expires_ns FROM approvals WHERE expires_ns IS NOT NULL ORDER BY expires_ns LIMIT 1`)
}

// firstNanos runs a query of one optional bigint nanosecond time, with a
// short timeout: false when there is none or the database did not answer.
func (s *DB) firstNanos(sql string) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var n int64
	if err := s.pool.QueryRow(ctx, sql).Scan(&n); err != nil {
		return time.Time{}, false
	}
	return fromNanos(n), true
}

// Once records key and reports whether this was the first time (for "at
// most one reply per address per day", the caller puts the day in the key).
// The primary key decides between replicas.
func (s *DB) Once(ctx context.Context, key string, now time.Time) (bool, error) {
	doc, err := json.Marshal(store.Counter{Count: 1, WindowStart: now})
	if err != nil {
		return false, fmt.Errorf("once %q: %w", key, err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO approval_limits (key, doc) VALUES ($1, $2) ON CONFLICT DO NOTHING`, key, doc)
	if err != nil {
		return false, fmt.Errorf("once %q: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// checkApprovalsTx refuses, before anything is written, approvals whose id
// or token is already stored (or repeated among them): ErrDuplicateApproval.
// A concurrent ingest of the same id or token that this check cannot see
// yet is refused by the primary keys when putApprovalsTx writes.
func (s *DB) checkApprovalsTx(ctx context.Context, tx pgx.Tx, as []store.NewApproval) error {
	ids, hashes, err := approvalKeys(as)
	if err != nil {
		return err
	}
	var taken bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM approvals WHERE id = ANY($1))
		OR EXISTS (SELECT 1 FROM approval_tokens WHERE hash = ANY($2))`, s.planEach, ids, hashes).Scan(&taken)
	if err != nil {
		return fmt.Errorf("check approvals: %w", err)
	}
	if taken {
		return fmt.Errorf("approval id or token already stored: %w", store.ErrDuplicateApproval)
	}
	return nil
}

// approvalKeys are the ids and token hashes of as, refused when empty,
// oversize or repeated.
func approvalKeys(as []store.NewApproval) (ids, hashes []string, err error) {
	seenID, seenHash := map[string]bool{}, map[string]bool{}
	for _, na := range as {
		id := na.Approval.ID
		if id == "" || len(id) > approvalMaxKey {
			return nil, nil, fmt.Errorf("approval id %q: empty or longer than %d bytes", id, approvalMaxKey)
		}
		if seenID[id] {
			return nil, nil, fmt.Errorf("approval %q: %w", id, store.ErrDuplicateApproval)
		}
		seenID[id] = true
		ids = append(ids, id)
		for h := range na.Tokens {
			if h == "" || len(h) > approvalMaxKey {
				return nil, nil, fmt.Errorf("approval %q: empty or oversize token hash", id)
			}
			if seenHash[h] {
				return nil, nil, fmt.Errorf("approval %q: token collision: %w", id, store.ErrDuplicateApproval)
			}
			seenHash[h] = true
			hashes = append(hashes, h)
		}
	}
	return ids, hashes, nil
}

// putApprovalsTx writes approvals that checkApprovalsTx has let through in
// the same transaction: each approval (pending unless it says otherwise,
// created now unless it says when), its token bindings, its code guards and
// its "created" audit entry. An id or token another transaction stored
// meanwhile is ErrDuplicateApproval.
func (s *DB) putApprovalsTx(ctx context.Context, tx pgx.Tx, envID string, as []store.NewApproval, now time.Time) error {
	b := &pgx.Batch{}
	for _, na := range as {
		a := na.Approval
		a.EnvelopeID = envID
		if a.State == "" {
			a.State = store.ApprovalPending
		}
		if a.CreatedAt.IsZero() {
			a.CreatedAt = now
		}
		if err := queueApproval(b, &a, na.Tokens, na.Events, now); err != nil {
			return err
		}
		if a.State == store.ApprovalPending && na.Decision == nil {
			if err := queueTimers(b, na.Timers); err != nil {
				return err
			}
		}
	}
	err := tx.SendBatch(ctx, b).Close()
	if uniqueViolation(err) {
		return fmt.Errorf("store approvals: %w", store.ErrDuplicateApproval)
	}
	if err != nil {
		return fmt.Errorf("store approvals: %w", err)
	}
	for _, na := range as {
		if d := na.Decision; d != nil {
			d.ApprovalID = na.Approval.ID
			if _, _, _, err := s.decideTx(ctx, tx, *d); err != nil {
				return fmt.Errorf("decide approval %s at ingest: %w", na.Approval.ID, err)
			}
		}
	}
	return nil
}

// queueApproval queues the inserts of a new approval a and its tokens.
func queueApproval(b *pgx.Batch, a *store.Approval, tokens map[string]store.TokenBinding, events []store.ApprovalEvent, now time.Time) error {
	doc, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode approval %s: %w", a.ID, err)
	}
	b.Queue(`INSERT INTO approvals (id, state, expires_ns, doc) VALUES ($1, $2, $3, $4)`, a.ID, a.State, approvalExpiry(a), doc)
	if err := queueTokens(b, a, tokens); err != nil {
		return err
	}
	created := store.AuditEntry{At: now, ApprovalID: a.ID, Event: "created",
		Detail: fmt.Sprintf("%d recipient(s), expires %s", len(a.Recipients), a.ExpiresAt.UTC().Format(time.RFC3339))}
	doc, err = json.Marshal(created)
	if err != nil {
		return fmt.Errorf("encode audit entry of %s: %w", a.ID, err)
	}
	b.Queue(`INSERT INTO approval_audit (approval_id, at_ns, doc) VALUES ($1, $2, $3)`, a.ID, nanos(now), doc)
	return queueNewTrail(b, a.ID, events, now)
}

// queueTokens queues the inserts of a's token bindings and of the code
// guards of its recipients (a guard already stored is kept).
func queueTokens(b *pgx.Batch, a *store.Approval, tokens map[string]store.TokenBinding) error {
	for h, tb := range tokens {
		doc, err := json.Marshal(tb)
		if err != nil {
			return fmt.Errorf("encode token binding of %s: %w", a.ID, err)
		}
		b.Queue(`INSERT INTO approval_tokens (hash, approval_id, doc) VALUES ($1, $2, $3)`, h, a.ID, doc)
	}
	if guards := codeGuards(a); len(guards) > 0 {
		unused, err := json.Marshal(store.Counter{})
		if err != nil {
			return fmt.Errorf("encode code guard of %s: %w", a.ID, err)
		}
		for _, g := range guards {
			b.Queue(insertCodeGuardSQL, g.channel, g.number, a.ID, unused)
		}
	}
	return nil
}
