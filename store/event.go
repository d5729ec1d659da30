package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Kinds of approval events (ApprovalEvent.Kind).
const (
	EventAsked     = "asked"
	EventReminded  = "reminded"
	EventEscalated = "escalated"
	EventVoted     = "voted"
	EventDecided   = "decided"
	EventExpired   = "expired"
	EventInjected  = "injected"
	EventWithdrawn = "withdrawn"
	// EventReturned: the decision of an approval asked through MCP
	// (session MCPSession) is kept for its caller, who reads it with
	// get_approval; no agent is called.
	EventReturned = "returned"
)

var eventKinds = map[string]bool{EventAsked: true, EventReminded: true, EventEscalated: true, EventVoted: true,
	EventDecided: true, EventExpired: true, EventInjected: true, EventWithdrawn: true,
	EventReturned: true}

// Bounds of an approval event: it is written on every answer, so it stays
// small. A longer value is cut (at a character boundary) when the event is
// sealed; more evidence keys are refused.
const (
	MaxEventField    = 256 // bytes of Actor, Channel, an evidence key
	MaxEventEvidence = 512 // bytes of one evidence value
	MaxEventKeys     = 12  // evidence entries
)

// ApprovalEvent is one event of an approval's trail, which is a hash
// chain: Hash is the hex SHA-256 of the event without its hash, serialised
// as RFC 8785 canonical JSON, and PrevHash is the hash of the event before
// it ("" for the first). The store assigns Seq (1, 2, … per approval) and
// PrevHash, and computes Hash, when it appends the event, in the
// transaction that reads the approval's last event: concurrent appends
// from any number of processes form one chain. A changed event no longer
// matches its hash, a removed one breaks the next event's PrevHash (or,
// for the last, the approval's head: ApprovalEventHead).
//
// Every field is always present in the JSON, Evidence as an object ({}
// when empty), so that anyone holding an exported event can check its
// hash with any RFC 8785 implementation.
type ApprovalEvent struct {
	Seq  int64     `json:"seq"`
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	// Actor is who or what caused the event: the recipient asked or
	// voting, decidedBy of a decision, the agent an injection reached.
	Actor   string `json:"actor"`
	Channel string `json:"channel"`
	// Evidence is what the event rests on, small and flat: for a vote its
	// decision, disposition (decided, ignored) and why, and what vouched
	// for the sender (the mail's DMARC/DKIM verdict, the Twilio request
	// signature, the link page's user agent).
	Evidence map[string]string `json:"evidence"`
	PrevHash string            `json:"prevHash"`
	Hash     string            `json:"hash"`
}

// ApprovalEventHead is the last event of an approval's trail as the store
// recorded it beside the events: its Seq (0 when there is none) and Hash.
// A trail that ends before its head lost its last events.
type ApprovalEventHead struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// hashedEvent is an ApprovalEvent without its hash: what the hash covers.
type hashedEvent struct {
	Seq      int64             `json:"seq"`
	At       time.Time         `json:"at"`
	Kind     string            `json:"kind"`
	Actor    string            `json:"actor"`
	Channel  string            `json:"channel"`
	Evidence map[string]string `json:"evidence"`
	PrevHash string            `json:"prevHash"`
}

// HashApprovalEvent is e's hash: the hex SHA-256 of e without Hash as RFC
// 8785 canonical JSON (keys sorted by UTF-16 code units, no white space,
// strings and numbers in their canonical forms). A nil Evidence counts as
// an empty one.
func HashApprovalEvent(e ApprovalEvent) (string, error) {
	h := hashedEvent{Seq: e.Seq, At: e.At, Kind: e.Kind, Actor: e.Actor, Channel: e.Channel, Evidence: e.Evidence, PrevHash: e.PrevHash}
	if h.Evidence == nil {
		h.Evidence = map[string]string{}
	}
	raw, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode approval event: %w", err)
	}
	v := jsontext.Value(raw)
	if err := v.Canonicalize(); err != nil {
		return "", fmt.Errorf("canonicalise approval event: %w", err)
	}
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:]), nil
}

// ErrBadEvent: an approval event to append is malformed (unknown kind, too
// many evidence entries).
var ErrBadEvent = errors.New("bad approval event")

// SealApprovalEvent makes e the event after head: it bounds e's fields,
// sets Seq, PrevHash and At (in UTC; now when zero) and computes Hash. The
// backends call it inside the transaction that appends e.
func SealApprovalEvent(e ApprovalEvent, head ApprovalEventHead, now time.Time) (ApprovalEvent, error) {
	if !eventKinds[e.Kind] {
		return e, fmt.Errorf("%w: kind %q", ErrBadEvent, e.Kind)
	}
	if len(e.Evidence) > MaxEventKeys {
		return e, fmt.Errorf("%w: %d evidence entries, at most %d", ErrBadEvent, len(e.Evidence), MaxEventKeys)
	}
	ev := make(map[string]string, len(e.Evidence))
	for k, v := range e.Evidence {
		if k == "" || len(k) > MaxEventField {
			return e, fmt.Errorf("%w: evidence key %q", ErrBadEvent, cut(k, 40))
		}
		ev[cut(k, MaxEventField)] = cut(v, MaxEventEvidence)
	}
	e.Evidence = ev
	e.Actor, e.Channel = cut(e.Actor, MaxEventField), cut(e.Channel, MaxEventField)
	if e.At.IsZero() {
		e.At = now
	}
	e.At = e.At.UTC().Round(0)
	e.Seq, e.PrevHash = head.Seq+1, head.Hash
	h, err := HashApprovalEvent(e)
	if err != nil {
		return e, err
	}
	e.Hash = h
	return e, nil
}

// cut bounds s to n bytes at a character boundary, and makes it valid
// UTF-8 (RFC 8785 serialises strings as they are; invalid UTF-8 would not
// survive a round trip through JSON).
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ChainError is a broken approval trail: the first position (1-based, in
// the order the trail was read) where it is wrong, and what is wrong there.
// ApprovalEvents returns one (wrapped) for an event it cannot decode.
type ChainError struct {
	Position int
	Seq      int64 // the Seq stored at Position (0 past the end)
	Reason   string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("event %d: %s", e.Position, e.Reason)
}

// VerifyApprovalEvents checks an approval's trail as read from the store,
// oldest first: every event's hash matches its content, its Seq is its
// position, and its PrevHash is the hash of the event before it. It
// returns a *ChainError naming the first position that fails, or nil.
func VerifyApprovalEvents(events []ApprovalEvent) error {
	prev := ""
	seqs := make(map[int64]bool, len(events))
	for _, e := range events {
		seqs[e.Seq] = true
	}
	for i, e := range events {
		pos := i + 1
		h, err := HashApprovalEvent(e)
		if err != nil {
			return &ChainError{Position: pos, Seq: e.Seq, Reason: err.Error()}
		}
		switch {
		case e.Seq != int64(pos) && seqs[int64(pos)]:
			return &ChainError{Position: pos, Seq: e.Seq, Reason: fmt.Sprintf("out of order: event %d stands where event %d should", e.Seq, pos)}
		case e.Seq > int64(pos):
			return &ChainError{Position: pos, Seq: e.Seq, Reason: fmt.Sprintf("missing: event %d was removed (the trail goes on with event %d)", pos, e.Seq)}
		case e.Seq != int64(pos):
			return &ChainError{Position: pos, Seq: e.Seq, Reason: fmt.Sprintf("out of order: it says it is event %d", e.Seq)}
		case h != e.Hash:
			return &ChainError{Position: pos, Seq: e.Seq, Reason: "changed: its content does not match its hash"}
		case e.PrevHash != prev:
			return &ChainError{Position: pos, Seq: e.Seq, Reason: "does not follow the event before it (its prevHash is not that event's hash)"}
		}
		prev = e.Hash
	}
	return nil
}

// VerifyApprovalTrail is VerifyApprovalEvents, and checks too that the
// trail ends at the head the store recorded: a trail whose last events
// were removed is reported at the first missing position.
func VerifyApprovalTrail(events []ApprovalEvent, head ApprovalEventHead) error {
	if err := VerifyApprovalEvents(events); err != nil {
		return err
	}
	n := int64(len(events))
	switch {
	case head.Seq > n:
		return &ChainError{Position: len(events) + 1, Reason: fmt.Sprintf("missing: the trail ends at event %d, its head is event %d (removed)", n, head.Seq)}
	case head.Seq < n:
		return &ChainError{Position: int(head.Seq) + 1, Seq: head.Seq + 1, Reason: fmt.Sprintf("not recorded: the head is event %d, the trail goes on to event %d (added)", head.Seq, n)}
	case n > 0 && events[n-1].Hash != head.Hash:
		return &ChainError{Position: len(events), Seq: n, Reason: "changed: its hash is not the one the head recorded"}
	}
	return nil
}
