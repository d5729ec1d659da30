package approvals

import (
	"context"
	"errors"

	"github.com/cool-ai/beachd/store"
)

// Event is one event of an approval's tamper-evident trail (asked,
// reminded, escalated, voted, decided, expired, injected, withdrawn,
// returned):
// {seq, at, kind, actor, channel, evidence, prevHash, hash}, where hash is
// the hex SHA-256 of the event without hash as RFC 8785 canonical JSON and
// prevHash the hash of the event before it ("" for the first). The store
// seals each event as it appends it (store.Approvals.AppendApprovalEvent,
// and inside the transactions of ingest, Decide, Note and RecordInjection),
// so that the appends of every replica form one chain.
type Event = store.ApprovalEvent

// Head is the trail's last event as the store recorded it beside the
// events (its seq and hash).
type Head = store.ApprovalEventHead

// ChainError is a trail that does not verify: the first position (1-based)
// where it breaks, and why.
type ChainError = store.ChainError

// Hash is e's hash: the hex SHA-256 of e without its hash, as RFC 8785
// canonical JSON.
func Hash(e Event) (string, error) { return store.HashApprovalEvent(e) }

// Verify checks a trail, oldest first: every event matches its hash, its
// seq is its position and its prevHash is the hash of the event before
// it. It returns a *ChainError naming the first bad position: a changed
// event is reported at its own position, a removed one at the position
// where it is missing.
func Verify(events []Event) error { return store.VerifyApprovalEvents(events) }

// VerifyHead is Verify, and checks too that the trail ends at the head
// the store recorded, so that removing the last events is reported as
// well (at the first missing position).
func VerifyHead(events []Event, head Head) error { return store.VerifyApprovalTrail(events, head) }

// Trail is an approval's event trail as read from the store, oldest
// first, with its head and the result of verifying it: Problem is nil when
// the trail verifies.
type Trail struct {
	ApprovalID string
	Events     []Event
	Head       Head
	Problem    *ChainError
}

// Trail reads approval id's trail and verifies it. store.ErrNotFound when
// there is no such approval. A trail holding an event the store cannot
// decode is reported as a Problem at that event's position, not as an
// error.
func (s *Service) Trail(ctx context.Context, id string) (*Trail, error) {
	evs, head, err := s.db.ApprovalEvents(ctx, id)
	if ce := (*ChainError)(nil); errors.As(err, &ce) {
		return &Trail{ApprovalID: id, Head: head, Problem: ce}, nil
	}
	if err != nil {
		return nil, err
	}
	t := &Trail{ApprovalID: id, Events: evs, Head: head}
	if err := VerifyHead(evs, head); err != nil {
		var ce *ChainError
		if !errors.As(err, &ce) {
			ce = &ChainError{Reason: err.Error()}
		}
		t.Problem = ce
	}
	return t, nil
}
