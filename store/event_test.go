package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var eventAt = time.Date(2026, 11, 21, 12, 0, 0, 500, time.UTC)

// The hash is over RFC 8785 canonical JSON: keys sorted, no white space,
// strings with only the escapes JCS requires (Go's encoder writes "<" as
// \u003c; JCS writes it as it is), and the hash field left out. The
// expected text is written out by hand.
func TestHashApprovalEventIsOverCanonicalJSON(t *testing.T) {
	e := ApprovalEvent{Seq: 2, At: eventAt, Kind: EventVoted, Actor: "Zoë <z@example.org>", Channel: "email",
		Evidence: map[string]string{"why": "late", "decision": "granted", "dmarc": "pass\t"}, PrevHash: "ab12", Hash: "ignored"}
	canonical := `{"actor":"Zoë <z@example.org>","at":"2026-11-21T12:00:00.0000005Z","channel":"email",` +
		`"evidence":{"decision":"granted","dmarc":"pass\t","why":"late"},"kind":"voted","prevHash":"ab12","seq":2}`
	sum := sha256.Sum256([]byte(canonical))
	got, err := HashApprovalEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("hash %s, want %s (sha256 of %s)", got, want, canonical)
	}
	// No evidence hashes as an empty object, as the stored event shows it.
	e.Evidence = nil
	a, _ := HashApprovalEvent(e)
	e.Evidence = map[string]string{}
	b, _ := HashApprovalEvent(e)
	if a != b {
		t.Fatal("nil and empty evidence hash differently")
	}
}

// chain seals n events after one another, as a backend appends them.
func chain(t *testing.T, n int) ([]ApprovalEvent, ApprovalEventHead) {
	t.Helper()
	var head ApprovalEventHead
	var out []ApprovalEvent
	for i := range n {
		e, err := SealApprovalEvent(ApprovalEvent{At: eventAt.Add(time.Duration(i) * time.Second), Kind: EventVoted,
			Actor: "a@example.org", Channel: "sms", Evidence: map[string]string{"decision": "granted"}}, head, eventAt)
		if err != nil {
			t.Fatal(err)
		}
		head = ApprovalEventHead{Seq: e.Seq, Hash: e.Hash}
		out = append(out, e)
	}
	return out, head
}

// roundTrip is events as a store gives them back: through their JSON.
func roundTrip(t *testing.T, evs []ApprovalEvent) []ApprovalEvent {
	t.Helper()
	raw, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	var out []ApprovalEvent
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestVerifyApprovalTrail(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(evs []ApprovalEvent, head *ApprovalEventHead) []ApprovalEvent
		pos    int    // 0: verifies
		reason string // part of the reason
	}{
		{"intact", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent { return evs }, 0, ""},
		{"evidence changed", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent {
			evs[2].Evidence["decision"] = "denied"
			return evs
		}, 3, "changed"},
		{"actor changed", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent {
			evs[0].Actor = "mallory@example.org"
			return evs
		}, 1, "changed"},
		{"time changed", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent {
			evs[3].At = evs[3].At.Add(-time.Hour)
			return evs
		}, 4, "changed"},
		{"changed and hash recomputed", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent {
			evs[1].Actor = "mallory@example.org"
			evs[1].Hash, _ = HashApprovalEvent(evs[1])
			return evs
		}, 3, "does not follow"},
		{"middle removed", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent {
			return append(evs[:1], evs[2:]...)
		}, 2, "event 2 was removed"},
		{"first removed", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent { return evs[1:] }, 1, "event 1 was removed"},
		{"last removed", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent { return evs[:4] }, 5, "removed"},
		{"last removed and head rewound", func(evs []ApprovalEvent, head *ApprovalEventHead) []ApprovalEvent {
			*head = ApprovalEventHead{Seq: 4, Hash: "0000"}
			return evs[:4]
		}, 4, "head"},
		{"two swapped", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent {
			evs[1], evs[2] = evs[2], evs[1]
			return evs
		}, 2, "out of order: event 3 stands where event 2 should"},
		{"renumbered after a removal", func(evs []ApprovalEvent, _ *ApprovalEventHead) []ApprovalEvent {
			evs = append(evs[:1], evs[2:]...)
			for i := range evs {
				evs[i].Seq = int64(i + 1)
			}
			return evs
		}, 2, "changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs, head := chain(t, 5)
			evs = roundTrip(t, c.tamper(roundTrip(t, evs), &head))
			err := VerifyApprovalTrail(evs, head)
			if c.pos == 0 {
				if err != nil {
					t.Fatalf("intact trail: %v", err)
				}
				return
			}
			var ce *ChainError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a ChainError at %d", err, c.pos)
			}
			if ce.Position != c.pos || !strings.Contains(ce.Reason, c.reason) {
				t.Fatalf("reported %q at %d, want %q at %d", ce.Reason, ce.Position, c.reason, c.pos)
			}
		})
	}
}

func TestSealApprovalEventBounds(t *testing.T) {
	e, err := SealApprovalEvent(ApprovalEvent{Kind: EventVoted, Actor: "a" + strings.Repeat("é", MaxEventField),
		Evidence: map[string]string{"ua": "bad \xff utf-8"}}, ApprovalEventHead{Seq: 7, Hash: "h7"}, eventAt)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Actor) != MaxEventField-1 || !utf8.ValidString(e.Actor) {
		t.Fatalf("actor cut to %d bytes, valid UTF-8 %v; want %d bytes, not half a character", len(e.Actor), utf8.ValidString(e.Actor), MaxEventField-1)
	}
	if e.Evidence["ua"] != "bad \uFFFD utf-8" {
		t.Fatalf("invalid UTF-8 kept: %q", e.Evidence["ua"])
	}
	if e.Seq != 8 || e.PrevHash != "h7" || !e.At.Equal(eventAt) {
		t.Fatalf("sealed %+v", e)
	}
	if evs := roundTrip(t, []ApprovalEvent{e}); evs[0].Hash != e.Hash {
		t.Fatal("hash changed through JSON")
	} else if h, _ := HashApprovalEvent(evs[0]); h != e.Hash {
		t.Fatal("a sealed event does not verify after a round trip through JSON")
	}
	if _, err := SealApprovalEvent(ApprovalEvent{Kind: "granted"}, ApprovalEventHead{}, eventAt); !errors.Is(err, ErrBadEvent) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// FuzzSealedEventRoundTrip: whatever an outside party puts in an event
// (a user agent, a reason, a sender's address: any bytes), the sealed
// event still matches its hash after a trip through JSON, as a store
// keeps it, and stays within its bounds. A string that JSON could not
// carry unchanged would make an honest trail fail verification.
func FuzzSealedEventRoundTrip(f *testing.F) {
	f.Add("alice@example.org", "email", "userAgent", "Mozilla/5.0 <script>")
	f.Add("\xff\xfe", "sms", "k\u2028", "\u0000\xed\xa0\x80")
	f.Add(strings.Repeat("é", 300), "", "reason", strings.Repeat("\x80", 600))
	f.Fuzz(func(t *testing.T, actor, channel, key, value string) {
		e, err := SealApprovalEvent(ApprovalEvent{Kind: EventVoted, Actor: actor, Channel: channel,
			Evidence: map[string]string{key: value, "decision": "granted"}}, ApprovalEventHead{Seq: 3, Hash: "abc"}, eventAt)
		if err != nil {
			if errors.Is(err, ErrBadEvent) {
				return // an empty or oversize key is refused
			}
			t.Fatal(err)
		}
		if len(e.Actor) > MaxEventField || len(e.Channel) > MaxEventField || len(e.Evidence[key]) > MaxEventEvidence {
			t.Fatalf("bounds not kept: %d %d %d", len(e.Actor), len(e.Channel), len(e.Evidence[key]))
		}
		got := roundTrip(t, []ApprovalEvent{e})[0]
		if h, err := HashApprovalEvent(got); err != nil || h != e.Hash {
			t.Fatalf("hash after a round trip %s, %v; sealed %s (%+v)", h, err, e.Hash, e)
		}
		if err := VerifyApprovalEvents([]ApprovalEvent{{Seq: 1, At: eventAt, Kind: EventAsked, Evidence: map[string]string{}}}); err == nil {
			t.Fatal("an event without its hash verified")
		}
	})
}

// BenchmarkSealApprovalEvent: what sealing a typical vote costs (its
// canonical JSON and SHA-256), and the bytes the stored event takes.
func BenchmarkSealApprovalEvent(b *testing.B) {
	e := ApprovalEvent{At: eventAt, Kind: EventVoted, Actor: "alice@example.org", Channel: "email",
		Evidence: map[string]string{"decision": "granted", "reason": "go ahead", "messageId": "<CAF=abc123@mail.example.org>",
			"senderAuth": "dmarc=pass", "disposition": "decided"}}
	head := ApprovalEventHead{Seq: 3, Hash: strings.Repeat("a", 64)}
	var sealed ApprovalEvent
	for b.Loop() {
		var err error
		if sealed, err = SealApprovalEvent(e, head, eventAt); err != nil {
			b.Fatal(err)
		}
	}
	raw, _ := json.Marshal(sealed)
	b.ReportMetric(float64(len(raw)), "stored-bytes")
}
