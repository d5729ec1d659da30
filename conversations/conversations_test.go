package conversations

import (
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// A new mail to the agent's inbound address starts a conversation with the
// real a2a-go agent; the answer is one delivery to the writer, from the
// agent's address, threaded; the person's reply to our answer (In-Reply-To
// naming our Message-ID) continues the same conversation.
func TestEmailConversationWithTheAgent(t *testing.T) {
	h := newHarness(t, opts{})
	res := h.in(mail("Ann@Example.org", "<m1@mail.example.org>", "Flights to Lisbon", "Find me a flight"))
	if res.Outcome != envelope.DispositionTurn || !strings.HasPrefix(res.Conversation, "cnv_") {
		t.Fatalf("first mail: %+v", res)
	}
	turn := h.waitTurn(res, "<m1@mail.example.org>", "email")
	if turn.State != store.TurnAnswered {
		t.Fatalf("turn %s: %s", turn.State, turn.LastError)
	}
	if got := h.answerText(turn); got != "Today's brief: Find me a flight" {
		t.Fatalf("answer text %q", got)
	}
	dels := h.answerDeliveries(turn)
	if len(dels) != 1 {
		t.Fatalf("%d answer deliveries", len(dels))
	}
	d := dels[0]
	want := map[string]string{envelope.ExtraConversation: res.Conversation, envelope.ExtraFrom: "travel@example.org",
		envelope.ExtraSubject: "Re: Flights to Lisbon", envelope.ExtraInReplyTo: "m1@mail.example.org",
		envelope.ExtraReferences: "<m1@mail.example.org>"}
	if d.Channel != "email" || d.To != "ann@example.org" || d.Agent != "travel" || d.State != store.StateQueued {
		t.Fatalf("answer delivery %+v", d)
	}
	for k, v := range want {
		if d.Extra[k] != v {
			t.Errorf("answer Extra[%s] = %q, want %q", k, d.Extra[k], v)
		}
	}
	env, _ := h.db.Envelope(h.ctx, turn.AnswerEnvelopeID)
	if env.Source != "conversation" || env.Agent != "travel" {
		t.Errorf("answer envelope source %q agent %q", env.Source, env.Agent)
	}
	msgs := h.real.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages sent to the agent", len(msgs))
	}
	m := msgs[0]
	beach, _ := m.Metadata["beach"].(map[string]any)
	if m.ContextID != res.Conversation || m.MessageID != a2aMessageID("email", "<m1@mail.example.org>", "") ||
		beach["from"] != "ann@example.org" || beach["to"] != "travel@example.org" || beach["subject"] != "Flights to Lisbon" ||
		beach["conversationId"] != res.Conversation || beach["channel"] != "email" || beach["messageId"] != "<m1@mail.example.org>" {
		t.Fatalf("A2A message %+v metadata %v", m, m.Metadata)
	}
	if full := m.Parts[0].Metadata["fullText"]; full != "Find me a flight\n\n-- \nsignature" {
		t.Fatalf("full text metadata %q", full)
	}

	// The reply names our answer's Message-ID.
	reply := mail("ann@example.org", "<m2@mail.example.org>", "Re: Flights to Lisbon", "The cheaper one")
	reply.To, reply.Recipients = "travel+c-x@example.org", []string{"travel+c-x@example.org"} // not an inbound address
	reply.InReplyTo = "<" + d.ID + ".tok123@beachd.example.org>"
	reply.References = []string{"<m1@mail.example.org>", reply.InReplyTo}
	res2 := h.in(reply)
	if res2.Outcome != envelope.DispositionTurn || res2.Conversation != res.Conversation {
		t.Fatalf("reply: %+v, want a turn in %s", res2, res.Conversation)
	}
	turn2 := h.waitTurn(res2, "<m2@mail.example.org>", "email")
	d2 := h.answerDeliveries(turn2)[0]
	if d2.Extra[envelope.ExtraInReplyTo] != "m2@mail.example.org" || d2.Extra[envelope.ExtraSubject] != "Re: Flights to Lisbon" ||
		d2.Extra[envelope.ExtraReferences] != "<m1@mail.example.org> "+reply.InReplyTo+" <m2@mail.example.org>" {
		t.Fatalf("second answer Extra %v", d2.Extra)
	}
	if got := h.real.messages(); len(got) != 2 || got[1].ContextID != res.Conversation {
		t.Fatalf("second message context %+v", got)
	}
	detail, err := h.r.Conversation(h.ctx, res.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range detail.Messages {
		dirs = append(dirs, m.Direction)
	}
	if strings.Join(dirs, ",") != "in,out,in,out" || detail.Conversation.Turns != 2 ||
		detail.Messages[1].Text != "Today's brief: Find me a flight" {
		t.Fatalf("detail %v turns %d %+v", dirs, detail.Conversation.Turns, detail.Messages)
	}
	if n := counter(t, h.metrics.turns.WithLabelValues("email", "started")); n != 2 {
		t.Fatalf("turns started metric %v", n)
	}
}

// An SMS to the agent's number starts a conversation; the next SMS from
// the same number continues it while it is open, and after the idle
// timeout starts a new one.
func TestSMSThread(t *testing.T) {
	h := newHarness(t, opts{})
	sms := func(id, text string) envelope.Inbound {
		return envelope.Inbound{Channel: "sms", From: "+447700900001", To: "+15550001111", Recipients: []string{"+15550001111"},
			MessageID: id, Text: text, FullText: text}
	}
	r1 := h.in(sms("SM1", "hello there"))
	if r1.Outcome != envelope.DispositionTurn {
		t.Fatalf("first sms %+v", r1)
	}
	t1 := h.waitTurn(r1, "SM1", "sms")
	d := h.answerDeliveries(t1)[0]
	if d.Channel != "sms" || d.To != "+447700900001" || d.Extra[envelope.ExtraFrom] != "+15550001111" ||
		d.Extra[envelope.ExtraConversation] != r1.Conversation {
		t.Fatalf("sms answer %+v", d)
	}
	r2 := h.in(sms("SM2", "and tomorrow"))
	if r2.Conversation != r1.Conversation {
		t.Fatalf("second sms went to %s, want %s", r2.Conversation, r1.Conversation)
	}
	h.waitTurn(r2, "SM2", "sms")
	h.clock.Advance(25 * 60 * 60 * 1e9)
	r3 := h.in(sms("SM3", "back again"))
	if r3.Outcome != envelope.DispositionTurn || r3.Conversation == r1.Conversation {
		t.Fatalf("after the idle timeout %+v", r3)
	}
	h.waitTurn(r3, "SM3", "sms")
}

// The same provider message id twice (a redelivery, concurrent or not)
// is one record and one turn.
func TestDuplicateMessageIsOneTurn(t *testing.T) {
	h := newHarness(t, opts{})
	in := mail("ann@example.org", "<dup@mail.example.org>", "Hi", "hello")
	results := make(chan envelope.InboundResult, 4)
	for range 4 {
		go func() { results <- h.in(in) }()
	}
	turns, dups := 0, 0
	for range 4 {
		switch r := <-results; r.Outcome {
		case envelope.DispositionTurn:
			turns++
		case envelope.DispositionDuplicate:
			dups++
		default:
			t.Fatalf("outcome %+v", r)
		}
	}
	if turns != 1 || dups != 3 {
		t.Fatalf("%d turns, %d duplicates", turns, dups)
	}
	h.waitTurn(envelope.InboundResult{}, "<dup@mail.example.org>", "email")
	if r := h.in(in); r.Outcome != envelope.DispositionDuplicate {
		t.Fatalf("later redelivery %+v", r)
	}
	if n := len(h.real.messages()); n != 1 {
		t.Fatalf("%d messages to the agent", n)
	}
	all, _ := h.db.ListTurns(h.ctx, "", 10)
	if len(all) != 1 {
		t.Fatalf("%d turns stored", len(all))
	}
}

// With the real approvals service first: an email carrying a token that
// names no approval stays the approvals' (no turn); an SMS to the agent's
// number whose digits look like a code (approvals answers unknown-token)
// is a conversation message.
func TestRealApprovalsComeFirst(t *testing.T) {
	h := newHarness(t, opts{agent: &fakeAgent{}, noRun: true})
	in := mail("ann@example.org", "<tok@x>", "Re: approve?", "yes")
	in.Token, in.TokenSource = "abcdefghijklmnop", "in-reply-to"
	if res := h.in(in); res.Outcome != "unknown-token" {
		t.Fatalf("email with a token: %+v", res)
	}
	rec, _ := h.db.InboundByMessageID(h.ctx, "email", "<tok@x>")
	if rec.Disposition != envelope.DispositionApproval || rec.TurnID != "" {
		t.Fatalf("record %+v", rec)
	}
	sms := envelope.Inbound{Channel: "sms", From: "+447700900001", To: "+15550001111", MessageID: "SMcode",
		Text: "Meet at gate 123456 please"}
	if res := h.in(sms); res.Outcome != envelope.DispositionTurn {
		t.Fatalf("sms with digits: %+v", res)
	}
	plain := envelope.Inbound{Channel: "sms", From: "+447700900001", To: "+15550001111", MessageID: "SMplain", Text: "hello"}
	if res := h.in(plain); res.Outcome != envelope.DispositionTurn {
		t.Fatalf("plain sms: %+v", res)
	}
	if res := h.in(plain); res.Outcome != envelope.DispositionDuplicate {
		t.Fatalf("plain sms again: %+v", res)
	}
}

// The real agent answering with a message at once (no task), and failing
// its task: the first is delivered, the second recorded only.
func TestAgentMessageAndFailedTask(t *testing.T) {
	h := newHarness(t, opts{})
	r1 := h.in(mail("ann@example.org", "<rm1@x>", "Q", "reply:Sure, Tuesday works"))
	t1 := h.waitTurn(r1, "<rm1@x>", "email")
	if t1.State != store.TurnAnswered || t1.TaskID != "" || h.answerText(t1) != "Sure, Tuesday works" || len(h.answerDeliveries(t1)) != 1 {
		t.Fatalf("message answer %+v", t1)
	}
	r2 := h.in(mail("ann@example.org", "<rm2@x>", "Q", "fail:database down"))
	t2 := h.waitTurn(r2, "<rm2@x>", "email")
	if t2.State != store.TurnAnswered || t2.TaskID == "" || len(h.answerDeliveries(t2)) != 0 || h.answerText(t2) != "database down" {
		t.Fatalf("failed task %+v text %q", t2, h.answerText(t2))
	}
}
