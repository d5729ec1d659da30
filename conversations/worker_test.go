package conversations

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
)

// fakeAgent is an Agent whose answers a test decides: the parts of its
// answer (default one text part echoing the message), an error to return
// from SendMessage, or a WaitTurn that blocks until its context ends.
type fakeAgent struct {
	mu      sync.Mutex
	sent    []*agent.Message
	waits   []*agent.Turn
	sendErr error
	block   bool
	parts   []envelope.Part
	final   string
}

func (f *fakeAgent) SendMessage(ctx context.Context, name string, msg *agent.Message) (*agent.Turn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, msg)
	if f.sendErr != nil {
		return nil, f.sendErr
	}
	id := fmt.Sprintf("task-%d", len(f.sent))
	return &agent.Turn{ContextID: msg.ContextID, TaskID: id, Task: &agent.Task{ID: id, ContextID: msg.ContextID},
		PushID: "push-" + id}, nil
}

// ResumeTurn resumes a turn under its push id, as agent.Client does.
func (f *fakeAgent) ResumeTurn(ctx context.Context, name, contextID, taskID, pushID string) *agent.Turn {
	return &agent.Turn{ContextID: contextID, TaskID: taskID, PushID: pushID}
}

func (f *fakeAgent) WaitTurn(ctx context.Context, name string, t *agent.Turn, poll time.Duration) (*envelope.Envelope, error) {
	f.mu.Lock()
	f.waits = append(f.waits, t)
	block, parts, final := f.block, f.parts, f.final
	var text string
	if len(f.sent) > 0 {
		text = *f.sent[len(f.sent)-1].Parts[0].Text
	}
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if parts == nil {
		a := "echo: " + text
		parts = []envelope.Part{{Text: &a, Metadata: map[string]any{"partType": "response"}}}
	}
	if final == "" {
		final = "complete"
	}
	return &envelope.Envelope{Role: "agent", Parts: parts, Meta: envelope.Meta{SessionID: t.ContextID, TurnID: t.TaskID,
		ProducedAt: time.Now().UTC(), FinalizedBy: final}}, nil
}

func (f *fakeAgent) counts() (sent, waits int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent), len(f.waits)
}

func (f *fakeAgent) set(fn func(*fakeAgent)) { f.mu.Lock(); fn(f); f.mu.Unlock() }

// beachd stops after storing the message and before sending it: the
// restarted worker sends it once.
func TestCrashBeforeSendIsOneTurn(t *testing.T) {
	clock := fakeclock.NewOffset()
	fa := &fakeAgent{}
	h := newHarness(t, opts{agent: fa, noRun: true, clock: clock})
	res := h.in(mail("ann@example.org", "<c1@x>", "Trip", "book it"))
	h.stop()
	h.db.Close()

	h2 := newHarness(t, opts{agent: fa, clock: clock, dbPath: h.path})
	turn := h2.waitTurn(res, "<c1@x>", "email")
	if turn.State != store.TurnAnswered || len(h2.answerDeliveries(turn)) != 1 {
		t.Fatalf("turn after restart %+v", turn)
	}
	if s, _ := fa.counts(); s != 1 {
		t.Fatalf("%d sends", s)
	}
}

// beachd stops while the agent works on the turn (the message was sent,
// the task id and push id stored): the restarted worker waits for that
// task, under the turn's push id, and sends nothing again.
func TestCrashWhileWaitingPollsTheSameTask(t *testing.T) {
	clock := fakeclock.NewOffset()
	fa := &fakeAgent{block: true}
	h := newHarness(t, opts{agent: fa, clock: clock})
	res := h.in(mail("ann@example.org", "<c2@x>", "Trip", "book it"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, w := fa.counts(); w == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn never reached WaitTurn")
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.stop() // the attempt ends with its context: nothing is recorded, the claim stays
	rec, _ := h.db.InboundByMessageID(h.ctx, "email", "<c2@x>")
	if tr, _ := h.db.Turn(h.ctx, rec.TurnID); tr.State != store.TurnSending || tr.TaskID != "task-1" || tr.PushID != "push-task-1" {
		t.Fatalf("turn at the crash %+v", tr)
	}
	h.db.Close()

	fa.set(func(f *fakeAgent) { f.block = false })
	h2 := newHarness(t, opts{agent: fa, clock: clock, dbPath: h.path})
	turn := h2.waitTurn(res, "<c2@x>", "email")
	if turn.State != store.TurnAnswered {
		t.Fatalf("turn %+v", turn)
	}
	s, w := fa.counts()
	if s != 1 || w != 2 || fa.waits[1].TaskID != "task-1" || fa.waits[1].ContextID != res.Conversation ||
		fa.waits[1].PushID != "push-task-1" {
		t.Fatalf("%d sends, %d waits (last %+v)", s, w, fa.waits[len(fa.waits)-1])
	}
}

// The answer's ingest is keyed by the turn: an attempt repeated after the
// answer was stored (a crash before the turn was marked) stores nothing
// twice.
func TestAnswerIngestIsIdempotent(t *testing.T) {
	fa := &fakeAgent{}
	h := newHarness(t, opts{agent: fa, noRun: true})
	res := h.in(mail("ann@example.org", "<i1@x>", "Trip", "book it"))
	c, _ := h.db.Conversation(h.ctx, res.Conversation)
	tr := &store.Turn{ID: "trn_x", Agent: "travel"}
	text := "answer"
	env := &envelope.Envelope{Role: "agent", Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": "response"}}},
		Meta: envelope.Meta{SessionID: "s", TurnID: "t", ProducedAt: time.Now().UTC(), FinalizedBy: "complete"}}
	id1, err := h.r.answer(h.ctx, c, tr, env)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := h.r.answer(h.ctx, c, tr, env)
	if err != nil || id2 != id1 {
		t.Fatalf("second answer %s %v, first %s", id2, err, id1)
	}
	if dels, _ := h.db.ListDeliveries(h.ctx, "", "", 10); len(dels) != 1 {
		t.Fatalf("%d deliveries", len(dels))
	}
}

// A permanent agent error dead-letters the turn at once (counted); an
// operator's retry runs it again. A transient error is retried with
// backoff, and dead-lettered after MaxAttempts, or at the end of its
// lifetime.
func TestDeadLetterAndRetry(t *testing.T) {
	fa := &fakeAgent{sendErr: fmt.Errorf("agent said no: %w", agent.ErrPermanent)}
	h := newHarness(t, opts{agent: fa})
	res := h.in(mail("ann@example.org", "<d1@x>", "Trip", "book it"))
	turn := h.waitTurn(res, "<d1@x>", "email")
	if turn.State != store.TurnDead || turn.Attempts != 1 || !strings.HasPrefix(turn.LastError, "permanent:") {
		t.Fatalf("turn %+v", turn)
	}
	deadline := time.Now().Add(5 * time.Second) // counted just after the record
	for counter(t, h.metrics.dead.WithLabelValues("email")) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("dead metric %v", counter(t, h.metrics.dead.WithLabelValues("email")))
		}
		time.Sleep(time.Millisecond)
	}
	fa.set(func(f *fakeAgent) { f.sendErr = nil })
	done := h.r.watch(turn.ID)
	if _, err := h.r.RetryTurn(h.ctx, turn.ID); err != nil {
		t.Fatal(err)
	}
	if st := <-done; st != store.TurnAnswered {
		t.Fatalf("retried turn %s", st)
	}
	if _, err := h.r.RetryTurn(h.ctx, "trn_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("retry of a missing turn: %v", err)
	}

	fb := &fakeAgent{sendErr: errors.New("connection refused")}
	h2 := newHarness(t, opts{agent: fb, cfg: func(c *Config) { c.MaxAttempts = 3 }})
	res2 := h2.in(mail("ann@example.org", "<d2@x>", "Trip", "book it"))
	t2 := h2.waitTurn(res2, "<d2@x>", "email")
	if t2.State != store.TurnDead || t2.Attempts != 3 || !strings.Contains(t2.LastError, "gave up after 3 attempts") {
		t.Fatalf("transient turn %+v", t2)
	}
	if s, _ := fb.counts(); s != 3 {
		t.Fatalf("%d sends", s)
	}

	// Without MaxAttempts a failing agent is retried until the turn's
	// lifetime is over, then dead-lettered.
	fc := &fakeAgent{sendErr: errors.New("connection refused")}
	h3 := newHarness(t, opts{agent: fc, cfg: func(c *Config) { c.Lifetime = 150 * time.Millisecond }})
	res3 := h3.in(mail("ann@example.org", "<d3@x>", "Trip", "book it"))
	t3 := h3.waitTurn(res3, "<d3@x>", "email")
	if t3.State != store.TurnDead || t3.Attempts < 3 || !strings.Contains(t3.LastError, "gave up after") {
		t.Fatalf("turn past its lifetime %+v", t3)
	}
}

// An answer without text, or of a failed task, is recorded (the turn is
// answered, the envelope stored) and sends nothing.
func TestAnswerWithoutTextSendsNothing(t *testing.T) {
	data := []envelope.Part{{Data: []byte(`{"tasks":3}`), Metadata: map[string]any{"partType": "domain-data"}}}
	fa := &fakeAgent{parts: data}
	h := newHarness(t, opts{agent: fa})
	res := h.in(mail("ann@example.org", "<n1@x>", "Trip", "book it"))
	turn := h.waitTurn(res, "<n1@x>", "email")
	if turn.State != store.TurnAnswered || turn.AnswerEnvelopeID == "" || len(h.answerDeliveries(turn)) != 0 {
		t.Fatalf("data-only answer: %+v", turn)
	}
	text := "internal stack trace"
	fa.set(func(f *fakeAgent) {
		f.parts, f.final = []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": "error"}}}, "error"
	})
	res2 := h.in(mail("ann@example.org", "<n2@x>", "Trip", "again"))
	turn2 := h.waitTurn(res2, "<n2@x>", "email")
	if turn2.State != store.TurnAnswered || len(h.answerDeliveries(turn2)) != 0 {
		t.Fatalf("failed task's answer: %+v", turn2)
	}
}

// A WhatsApp answer after the 24-hour window is held, with a window
// template delivery; the person's next message releases it.
func TestWhatsAppWindow(t *testing.T) {
	fa := &fakeAgent{}
	h := newHarness(t, opts{agent: fa, noRun: true})
	wa := func(id string) envelope.Inbound {
		return envelope.Inbound{Channel: "whatsapp", From: "+447700900003", To: "+15550002222", MessageID: id, Text: "hi"}
	}
	res := h.in(wa("WA1"))
	h.clock.Advance(25 * time.Hour) // the turn is answered a day late (retries)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { h.r.Run(ctx); close(done) }()
	turn := h.waitTurn(res, "WA1", "whatsapp")
	cancel()
	<-done
	dels := h.answerDeliveries(turn)
	if len(dels) != 2 || dels[0].State != store.StateHeld || dels[1].State != store.StateQueued ||
		dels[1].Extra[envelope.ExtraTemplate] != "window" || dels[0].Extra[envelope.ExtraTemplate] != "" ||
		dels[1].Extra[envelope.ExtraConversation] != res.Conversation {
		t.Fatalf("answer outside the window: %+v %+v", dels[0], dels[1])
	}
	detail, _ := h.r.Conversation(h.ctx, res.Conversation)
	if detail.WindowOpen {
		t.Fatal("window open a day later")
	}
	if nd, _ := h.r.Resolve(h.ctx, res.Conversation); !nd.Held || nd.Extra[envelope.ExtraFrom] != "+15550002222" {
		t.Fatalf("resolve with the window closed %+v", nd)
	}
	if nd, _ := h.r.Resolve(h.ctx, res.Conversation); nd.WindowTemplate().Extra[envelope.ExtraTemplate] != "window" {
		t.Fatalf("the window template of a held delivery %+v", nd.WindowTemplate())
	}
	h.clock.Advance(time.Hour)
	before := h.send.n
	r2 := h.in(wa("WA2"))
	if r2.Conversation != res.Conversation {
		t.Fatalf("the person's answer to the template went to %s", r2.Conversation)
	}
	d, _ := h.db.Delivery(h.ctx, dels[0].ID)
	if d.State != store.StateQueued || h.send.n == before {
		t.Fatalf("held answer after the person wrote: %s (notified %d→%d)", d.State, before, h.send.n)
	}
	detail, _ = h.r.Conversation(h.ctx, res.Conversation)
	if !detail.WindowOpen || !detail.WindowClosesAt.After(h.clock.Now()) {
		t.Fatalf("window after the person wrote %+v", detail)
	}
	if nd, _ := h.r.Resolve(h.ctx, res.Conversation); nd.Held {
		t.Fatal("resolve holds with the window open")
	}
}

type fakeMedia struct {
	mu   sync.Mutex
	urls []string
}

func (m *fakeMedia) FetchMedia(ctx context.Context, url string, max int64) ([]byte, string, error) {
	m.mu.Lock()
	m.urls = append(m.urls, url)
	m.mu.Unlock()
	if strings.HasSuffix(url, "/big") {
		return bytes.Repeat([]byte("b"), 5000), "image/png", nil
	}
	return []byte("small media"), "image/jpeg", nil
}

// Attachments up to AttachmentInlineMax travel inline; larger ones as
// signed expiring URLs that OpenAttachment serves; Twilio media is fetched
// through the MediaFetcher when the turn is built.
func TestAttachmentsInlineAndURL(t *testing.T) {
	fa := &fakeAgent{}
	media := &fakeMedia{}
	h := newHarness(t, opts{agent: fa, cfg: func(c *Config) { c.Media = media }})
	in := mail("ann@example.org", "<att@x>", "Docs", "see attached")
	big := bytes.Repeat([]byte("x"), 4096)
	in.Attachments = []envelope.InboundAttachment{
		{Filename: "note.txt", MediaType: "text/plain", Data: []byte("small")},
		{Filename: "scan.pdf", MediaType: "application/pdf", Data: big},
	}
	res := h.in(in)
	h.waitTurn(res, "<att@x>", "email")
	msg := fa.sent[0]
	if len(msg.Parts) != 3 || string(msg.Parts[1].Raw) != "small" || msg.Parts[1].Filename != "note.txt" ||
		msg.Parts[2].Raw != nil || msg.Parts[2].MediaType != "application/pdf" {
		t.Fatalf("parts %+v", msg.Parts)
	}
	u := msg.Parts[2].URL
	rec, _ := h.db.InboundByMessageID(h.ctx, "email", "<att@x>")
	prefix := "https://beachd.example.org/v1/inbound/" + rec.ID + "/attachments/1?expires="
	if !strings.HasPrefix(u, prefix) {
		t.Fatalf("url %q", u)
	}
	q := strings.TrimPrefix(u, prefix)
	exp, sig, _ := strings.Cut(q, "&sig=")
	name, mt, data, err := h.r.OpenAttachment(h.ctx, rec.ID, 1, exp, sig)
	if err != nil || name != "scan.pdf" || mt != "application/pdf" || !bytes.Equal(data, big) {
		t.Fatalf("open: %q %q %d bytes %v", name, mt, len(data), err)
	}
	flipped := sig[:len(sig)-1] + "A"
	if sig[len(sig)-1] == 'A' {
		flipped = sig[:len(sig)-1] + "B"
	}
	for _, bad := range []struct {
		n        int
		exp, sig string
	}{{0, exp, sig}, {1, exp + "0", sig}, {1, exp, flipped}, {1, "x", sig}, {1, exp, ""}} {
		if _, _, _, err := h.r.OpenAttachment(h.ctx, rec.ID, bad.n, bad.exp, bad.sig); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("tampered link %+v opened: %v", bad, err)
		}
	}
	if _, _, _, err := h.r.OpenAttachment(h.ctx, "inb_other", 1, exp, sig); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("another message's link: %v", err)
	}
	h.clock.Advance(8 * 24 * time.Hour)
	if _, _, _, err := h.r.OpenAttachment(h.ctx, rec.ID, 1, exp, sig); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("expired link: %v", err)
	}

	// Twilio media: URLs only in the inbound message, fetched for the turn.
	wa := envelope.Inbound{Channel: "whatsapp", From: "+447700900004", To: "+15550002222", MessageID: "MMmedia", Text: "photo",
		Attachments: []envelope.InboundAttachment{{URL: "https://api.twilio.com/media/small"}, {URL: "https://api.twilio.com/media/big"}}}
	res2 := h.in(wa)
	h.waitTurn(res2, "MMmedia", "whatsapp")
	m2 := fa.sent[len(fa.sent)-1]
	if len(m2.Parts) != 3 || string(m2.Parts[1].Raw) != "small media" || m2.Parts[1].MediaType != "image/jpeg" ||
		!strings.Contains(m2.Parts[2].URL, "/attachments/1?expires=") || len(media.urls) != 2 {
		t.Fatalf("media parts %+v, fetched %v", m2.Parts, media.urls)
	}
}

// When the person writes only after the conversation went idle, the new
// conversation's first message still lets out the old one's held answer.
func TestWhatsAppHeldAnswerReleasedByANewConversation(t *testing.T) {
	fa := &fakeAgent{}
	h := newHarness(t, opts{agent: fa, noRun: true})
	wa := func(id string) envelope.Inbound {
		return envelope.Inbound{Channel: "whatsapp", From: "+447700900005", To: "+15550002222", MessageID: id, Text: "hi"}
	}
	res := h.in(wa("WB1"))
	h.clock.Advance(25 * time.Hour)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { h.r.Run(ctx); close(done) }()
	turn := h.waitTurn(res, "WB1", "whatsapp")
	cancel()
	<-done
	held := h.answerDeliveries(turn)[0]
	if held.State != store.StateHeld {
		t.Fatalf("answer %s", held.State)
	}
	h.clock.Advance(48 * time.Hour)
	r2 := h.in(wa("WB2"))
	if r2.Conversation == res.Conversation {
		t.Fatal("an idle conversation was continued")
	}
	if d, _ := h.db.Delivery(h.ctx, held.ID); d.State != store.StateQueued {
		t.Fatalf("old held answer %s", d.State)
	}
}
