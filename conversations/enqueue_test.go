package conversations

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// recordingEnqueuer stands in for the API's ingester.
type recordingEnqueuer struct {
	mu    sync.Mutex
	calls []enqueued
	err   error
}

type enqueued struct {
	to         []envelope.Recipient
	agent, key string
}

func (e *recordingEnqueuer) EnqueueKeyed(_ context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source, key string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, enqueued{to: to, agent: agent, key: key})
	if e.err != nil {
		return "", e.err
	}
	if source != "conversation" || env == nil {
		return "", errors.New("unexpected source or envelope")
	}
	return "env_from_ingester", nil
}

// With an Enqueuer, an answer is stored through it — to the conversation,
// keyed by the turn — so that it is validated and an approval-request in
// it mints its approval; an answer the ingester refuses as invalid is a
// permanent failure of the turn, not retried.
func TestAnswerGoesThroughTheEnqueuer(t *testing.T) {
	enq := &recordingEnqueuer{}
	h := newHarness(t, opts{agent: &fakeAgent{}, cfg: func(c *Config) { c.Enqueue = enq }})
	res := h.in(mail("ann@example.org", "<q1@x>", "Trip", "book it"))
	turn := h.waitTurn(res, "<q1@x>", "email")
	if turn.State != store.TurnAnswered || turn.AnswerEnvelopeID != "env_from_ingester" {
		t.Fatalf("turn %+v", turn)
	}
	enq.mu.Lock()
	if len(enq.calls) != 1 || len(enq.calls[0].to) != 1 || enq.calls[0].to[0].Conversation != res.Conversation ||
		enq.calls[0].agent != "travel" || !strings.Contains(enq.calls[0].key, turn.ID) {
		t.Fatalf("enqueued %+v, conversation %s, turn %s", enq.calls, res.Conversation, turn.ID)
	}
	enq.err = &envelope.ValidationError{Problems: []envelope.Problem{{Path: "to[0]", Reason: "not an approver"}}}
	enq.mu.Unlock()
	res2 := h.in(mail("ann@example.org", "<q2@x>", "Trip", "and again"))
	turn2 := h.waitTurn(res2, "<q2@x>", "email")
	if turn2.State != store.TurnDead || !strings.Contains(turn2.LastError, "not an approver") || turn2.Attempts != 1 {
		t.Fatalf("a refused answer: %+v", turn2)
	}
}
