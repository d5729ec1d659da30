package approvals

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// wrongCode is a code of the right length that is not right.
func wrongCode(right string, i int) string {
	c := fmt.Sprintf("%06d", 100000+i)
	if c == right {
		c = fmt.Sprintf("%06d", 900000+i)
	}
	return c
}

// THREATS #2: 30 wrong codes at once from one number evaluate at most the
// limit, and the right code after them is refused.
func TestSMSConcurrentGuessesStopAtTheLimit(t *testing.T) {
	h := newHarness(t, harnessOpt{}) // MaxWrongCodes 5
	env := h.suspend("appr-race")
	hd := h.handle(h.ingest(env, sms(aliceNum))[0])
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.svc.HandleInbound(h.ctx, envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: fmt.Sprint("G", i),
				Text: "yes " + wrongCode(hd.Code, i)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
			}
			outcomes[res.Outcome]++
		}()
	}
	wg.Wait()
	// Four are answered "wrong code"; the fifth locks; the rest find the
	// lock.
	if outcomes[OutcomeWrongCode] != 4 || outcomes[OutcomeRateLimited] != 26 {
		t.Fatalf("outcomes %v; want 4 wrong-code and 26 rate-limited", outcomes)
	}
	// Four answers showing the code again, one saying the code is locked;
	// the 25 texts that found the lock got nothing more.
	if got := h.told(aliceNum); len(got) != 5 {
		t.Fatalf("%d answers to 30 guesses, want 5: %q", len(got), got)
	}
	res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "R", Text: "yes " + hd.Code})
	if res.Outcome != OutcomeRateLimited || res.ApprovalID != "appr-race" {
		t.Fatalf("right code after the lock: %+v", res)
	}
	if a := h.approval("appr-race"); a.State != store.ApprovalPending {
		t.Fatalf("decided while locked: %s", a.State)
	}
}

// A lock earned on one approval does not silence the number: an approval
// sent to it afterwards is answered with its code, while the locked one
// still refuses its right code.
func TestSMSCodeLockIsPerApproval(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: func(c *Config) { c.MaxWrongCodes = 3 }})
	hdA := h.handle(h.ingest(h.suspend("appr-a"), sms(aliceNum))[0])
	for i := range 3 {
		h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: fmt.Sprint("W", i), Text: "yes " + wrongCode(hdA.Code, i)})
	}
	hdB := h.handle(h.ingest(h.suspend("appr-b"), sms(aliceNum))[0])
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "B", Text: "yes " + hdB.Code}); res.Outcome != OutcomeDecided || res.ApprovalID != "appr-b" {
		t.Fatalf("other approval's code after a lock: %+v", res)
	}
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "A", Text: "yes " + hdA.Code}); res.Outcome != OutcomeRateLimited {
		t.Fatalf("locked approval's right code: %+v", res)
	}
	if a := h.approval("appr-a"); a.State != store.ApprovalPending {
		t.Fatalf("locked approval decided: %s", a.State)
	}
	// The lock is on the approval's code, not on the approval: an
	// operator can still decide it (and the guard goes with it).
	if _, err := h.svc.Decide(h.ctx, "appr-a", envelope.DecisionDenied, "spoofed guesses", "op"); err != nil {
		t.Fatal(err)
	}
	h.settle()
}
