package storetest

import (
	"strings"
	"time"

	"github.com/cool-ai/beachd/store"
)

// recordCases are ids, the key-value space, seen keys and retention.
var recordCases = []testCase{
	{"ids/NewID is prefixed and sorts by time", newID},
	{"kv/put, get, overwrite and delete", kv},
	{"seen/MarkSeen is first once, ForgetSeen makes it first again", markSeen},
	{"retention/Prune removes only finished envelopes older than before, with their deliveries", prune},
	{"retention/PruneRecords forgets old idempotency keys, message ids and seen keys", pruneRecords},
	{"retention/PruneInbound removes old records whose turn finished, and stops at one still pending", pruneInbound},
}

func newID(e *env) {
	a := e.s.NewID("env_")
	b := e.s.NewID("env_")
	e.advance(time.Millisecond)
	c := e.s.NewID("env_")
	if !strings.HasPrefix(a, "env_") || len(a) != len("env_")+26 {
		e.t.Fatalf("id %q: want env_ and 26 characters", a)
	}
	if a == b {
		e.t.Fatalf("two ids alike: %s", a)
	}
	if c <= a || c <= b {
		e.t.Fatalf("a later id %s sorts before %s or %s", c, a, b)
	}
}

func kv(e *env) {
	if _, ok, err := e.s.GetKV(e.ctx, "imap/INBOX"); err != nil || ok {
		e.t.Fatalf("absent key: ok %v, %v", ok, err)
	}
	e.ok(e.s.PutKV(e.ctx, "imap/INBOX", []byte("17")), "put")
	e.ok(e.s.PutKV(e.ctx, "imap/Other", []byte("3")), "put other")
	e.ok(e.s.PutKV(e.ctx, "imap/INBOX", []byte("18")), "overwrite")
	v, ok, err := e.s.GetKV(e.ctx, "imap/INBOX")
	if err != nil || !ok || string(v) != "18" {
		e.t.Fatalf("get = %q, %v, %v; want 18", v, ok, err)
	}
	e.ok(e.s.DeleteKV(e.ctx, "imap/INBOX"), "delete")
	if _, ok, err := e.s.GetKV(e.ctx, "imap/INBOX"); err != nil || ok {
		e.t.Fatalf("deleted key: ok %v, %v", ok, err)
	}
	e.ok(e.s.DeleteKV(e.ctx, "imap/INBOX"), "delete an absent key")
	if v, ok, _ := e.s.GetKV(e.ctx, "imap/Other"); !ok || string(v) != "3" {
		e.t.Fatalf("other key = %q, %v", v, ok)
	}
}

func markSeen(e *env) {
	for i, want := range []bool{true, false} {
		first, err := e.s.MarkSeen(e.ctx, "msg/SM1")
		e.ok(err, "mark seen")
		if first != want {
			e.t.Fatalf("MarkSeen #%d = %v, want %v", i+1, first, want)
		}
	}
	e.ok(e.s.ForgetSeen(e.ctx, "msg/SM1"), "forget")
	if first, err := e.s.MarkSeen(e.ctx, "msg/SM1"); err != nil || !first {
		e.t.Fatalf("MarkSeen after forgetting = %v, %v; want first", first, err)
	}
	if first, _ := e.s.MarkSeen(e.ctx, "msg/SM2"); !first {
		e.t.Fatal("another key is not first")
	}
}

func prune(e *env) {
	old := e.ingest(to("webhook", "ep0"), to("webhook", "ep1"))
	got := e.claim(10)
	e.record(got[0], store.Outcome{State: store.StateSent, ProviderID: "P-old"})
	e.record(got[1], store.Outcome{State: store.StateDead, DeadReason: "gone"})
	pending, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: hooks(1), NotBefore: start.Add(24 * time.Hour)})
	e.ok(err, "ingest pending")
	e.advance(time.Hour)
	recent := e.ingest(hooks(1)...)
	e.record(e.claim(10)[0], store.Outcome{State: store.StateSent})

	n, err := e.s.Prune(e.ctx, start.Add(30*time.Minute), 100)
	e.ok(err, "prune")
	if n != 1 {
		e.t.Fatalf("pruned %d, want the old finished envelope", n)
	}
	_, err = e.s.Envelope(e.ctx, old.EnvelopeID)
	e.is(err, store.ErrNotFound, "pruned envelope")
	for _, d := range old.Deliveries {
		_, err = e.s.Delivery(e.ctx, d.ID)
		e.is(err, store.ErrNotFound, "pruned delivery")
		if atts, err := e.s.Attempts(e.ctx, d.ID); err != nil || len(atts) != 0 {
			e.t.Fatalf("attempts of a pruned delivery: %+v, %v", atts, err)
		}
	}
	_, err = e.s.DeliveryByProviderID(e.ctx, "webhook", "P-old")
	e.is(err, store.ErrNotFound, "provider id of a pruned delivery")
	for _, id := range []string{pending.EnvelopeID, recent.EnvelopeID} {
		_, err = e.s.Envelope(e.ctx, id)
		e.ok(err, "kept envelope")
	}
	if n, err := e.s.Prune(e.ctx, start.Add(30*time.Minute), 100); err != nil || n != 0 {
		e.t.Fatalf("second prune = %d, %v; want 0", n, err)
	}
	n, err = e.s.Prune(e.ctx, e.now().Add(time.Hour), 100)
	e.ok(err, "prune everything finished")
	if n != 1 {
		e.t.Fatalf("pruned %d, want the recent envelope", n)
	}
	_, err = e.s.Envelope(e.ctx, pending.EnvelopeID)
	e.ok(err, "unfinished envelope, whatever its age")
	counts, _ := e.s.CountByState(e.ctx)
	if counts[store.StateQueued] != 1 || counts[store.StateSent] != 0 || counts[store.StateDead] != 0 {
		e.t.Fatalf("counts after pruning %v", counts)
	}
}

func pruneRecords(e *env) {
	keyed := func(key, body string) (*store.IngestResult, error) {
		return e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(body), Deliveries: hooks(1), IdempotencyKey: key, RequestHash: store.HashRequest([]byte(body))})
	}
	note := func(msg string) {
		e.ok(e.s.Note(e.ctx, store.AuditEntry{At: e.now(), Event: "ignored", Channel: "email", MessageID: msg}), "note "+msg)
	}
	_, err := keyed("k-old", `{"n":1}`)
	e.ok(err, "old keyed ingest")
	_, err = e.s.MarkSeen(e.ctx, "msg/old")
	e.ok(err, "mark old")
	note("m-old")
	e.advance(time.Hour)
	_, err = keyed("k-new", `{"n":1}`)
	e.ok(err, "new keyed ingest")
	_, err = e.s.MarkSeen(e.ctx, "msg/new")
	e.ok(err, "mark new")
	note("m-new")

	n, err := e.s.PruneRecords(e.ctx, start.Add(30*time.Minute), 100)
	e.ok(err, "prune records")
	if n < 3 {
		e.t.Fatalf("pruned %d records, want at least the old key, seen key and message id", n)
	}
	if n, err := e.s.PruneRecords(e.ctx, start.Add(30*time.Minute), 100); err != nil || n != 0 {
		e.t.Fatalf("second prune = %d, %v; want 0", n, err)
	}
	for key, want := range map[string]bool{"msg/old": true, "msg/new": false} {
		if first, _ := e.s.MarkSeen(e.ctx, key); first != want {
			e.t.Fatalf("MarkSeen(%s) after pruning = %v, want %v", key, first, want)
		}
	}
	for msg, want := range map[string]bool{"m-old": false, "m-new": true} {
		if seen, _ := e.s.InboundSeen(e.ctx, "email", msg); seen != want {
			e.t.Fatalf("InboundSeen(%s) after pruning = %v, want %v", msg, seen, want)
		}
	}
	res, err := keyed("k-old", `{"n":2}`)
	e.ok(err, "pruned key with another body")
	if res.Replayed {
		e.t.Fatal("a pruned key replayed")
	}
	_, err = keyed("k-new", `{"n":2}`)
	e.is(err, store.ErrIdempotencyConflict, "kept key with another body")
}

func pruneInbound(e *env) {
	w1, err := e.inbound("SM1", "cnv_1", true)
	e.ok(err, "first")
	w2, err := e.inbound("SM2", "cnv_1", false)
	e.ok(err, "second")
	e.recordTurn(e.claimTurns()[0], store.TurnOutcome{State: store.TurnAnswered, At: e.now()})
	e.advance(time.Hour)
	w3, err := e.inbound("SM3", "cnv_2", true)
	e.ok(err, "third")
	before := start.Add(30 * time.Minute)

	n, err := e.s.PruneInbound(e.ctx, before, 100)
	e.ok(err, "prune inbound")
	if n != 1 {
		e.t.Fatalf("pruned %d, want the first (its turn answered; the second's is queued)", n)
	}
	_, err = e.s.InboundRecord(e.ctx, w1.Record.ID)
	e.is(err, store.ErrNotFound, "pruned record")
	_, err = e.s.InboundByMessageID(e.ctx, "sms", "SM1")
	e.is(err, store.ErrNotFound, "pruned record by message id")
	_, err = e.s.Turn(e.ctx, w1.Turn.ID)
	e.is(err, store.ErrNotFound, "pruned record's turn")
	_, err = e.s.Conversation(e.ctx, "cnv_1")
	e.ok(err, "conversation of a pruned record")
	msgs, err := e.s.ConversationMessages(e.ctx, "cnv_1", 10)
	e.ok(err, "messages")
	if len(msgs) != 1 || msgs[0].ID != w2.Record.ID {
		e.t.Fatalf("messages after pruning %+v, want the second only", msgs)
	}

	for _, t := range e.claimTurns() {
		e.recordTurn(t, store.TurnOutcome{State: store.TurnAnswered, At: e.now()})
	}
	n, err = e.s.PruneInbound(e.ctx, before, 100)
	e.ok(err, "prune inbound again")
	if n != 1 {
		e.t.Fatalf("pruned %d, want the second once its turn was answered", n)
	}
	if n, _ := e.s.PruneInbound(e.ctx, before, 100); n != 0 {
		e.t.Fatalf("third prune removed %d", n)
	}
	_, err = e.s.InboundRecord(e.ctx, w3.Record.ID)
	e.ok(err, "recent record")
}
