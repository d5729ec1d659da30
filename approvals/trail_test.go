package approvals

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// trail reads an approval's trail, fails the test unless it verifies
// against its head, and returns it.
func (h *harness) trail(id string) []Event {
	h.t.Helper()
	evs, head, err := h.db.ApprovalEvents(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := VerifyHead(evs, head); err != nil {
		h.t.Fatalf("trail of %s does not verify: %v", id, err)
	}
	return evs
}

// trailKinds are the kinds of a trail, a vote with its disposition and
// why ("voted:ignored:wrong-person"). (The a2a-go agent may refuse a first
// injection attempt while the turn is closing; only the attempt the agent
// took is in the trail.)
func trailKinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		k := e.Kind
		if d := e.Evidence["disposition"]; d != "" {
			k += ":" + d
		}
		if w := e.Evidence["why"]; w != "" {
			k += ":" + w
		}
		out = append(out, k)
	}
	return out
}

// An approval asked by email and SMS, answered first by the wrong person,
// then by SMS with its code, injected into the agent, and answered again
// by mail: every step is in its trail, the trail verifies, and each vote
// carries what the channel checked of its sender.
func TestTrailOfAnSMSDecision(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-trail")
	ds := h.ingest(env, email(alice), sms(aliceNum))
	he, hs := h.handle(ds[0]), h.handle(ds[1])
	if res := h.inbound(envelope.Inbound{Channel: "email", From: "mallory@example.org", MessageID: "<fw@x>", Token: he.Token,
		Text: "yes", Evidence: map[string]string{"senderAuth": "dmarc=pass"}}); res.Outcome != OutcomeWrongSender {
		t.Fatalf("forwarded: %+v", res)
	}
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "SM1", Text: "yes " + hs.Code + " ok",
		Evidence: map[string]string{"twilioSignature": "valid"}}); res.Outcome != OutcomeDecided {
		t.Fatalf("sms: %+v", res)
	}
	checkReceived(t, h, env, "appr-trail", "granted", aliceNum)
	// The injected event is written with the injection's record, just
	// after the agent answered.
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(trailKinds(h.trail("appr-trail")), store.EventInjected) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	if res := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<late@x>", Token: he.Token, Text: "no",
		Evidence: map[string]string{"senderAuth": "dmarc=pass"}}); res.Outcome != OutcomeAlreadyDecided {
		t.Fatalf("late mail: %+v", res)
	}
	evs := h.trail("appr-trail")
	want := []string{"asked", "asked", "voted:ignored:wrong-person", "voted:decided", "decided", "injected", "voted:ignored:already-decided"}
	if got := trailKinds(evs); !slices.Equal(got, want) {
		t.Fatalf("trail %v\nwant  %v", got, want)
	}
	for i, c := range []struct {
		actor, channel string
		evidence       map[string]string
	}{
		{alice, "email", nil},
		{aliceNum, "sms", nil},
		{"mallory@example.org", "email", map[string]string{"senderAuth": "dmarc=pass", "decision": "granted", "messageId": "<fw@x>"}},
		{aliceNum, "sms", map[string]string{"twilioSignature": "valid", "decision": "granted", "reason": "ok", "messageId": "SM1"}},
		{aliceNum, "sms", map[string]string{"decision": "granted", "reason": "ok"}},
		{"agent:travel", "a2a", map[string]string{"decision": "granted"}},
		{alice, "email", map[string]string{"senderAuth": "dmarc=pass", "decision": "denied", "messageId": "<late@x>"}},
	} {
		e := evs[i]
		if e.Actor != c.actor || e.Channel != c.channel {
			t.Errorf("event %d: %s on %s, want %s on %s", i+1, e.Actor, e.Channel, c.actor, c.channel)
		}
		for k, v := range c.evidence {
			if e.Evidence[k] != v {
				t.Errorf("event %d (%s): evidence %s = %q, want %q (all: %v)", i+1, e.Kind, k, e.Evidence[k], v, e.Evidence)
			}
		}
	}
	if strings.Contains(strings.Join(slices.Collect(mapValues(evs)), " "), hs.Code) {
		t.Fatal("the SMS code is in the trail")
	}
}

func mapValues(evs []Event) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, e := range evs {
			for _, v := range e.Evidence {
				if !yield(v) {
					return
				}
			}
		}
	}
}

// The link page's answer is in the trail with the page's user agent.
func TestTrailOfALinkDecision(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-trail-link")
	hd := h.handle(h.ingest(env, email(alice))[0])
	mux := http.NewServeMux()
	mux.Handle("/a/{token}", h.svc.LinkHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	link := srv.URL + strings.TrimPrefix(hd.LinkURL, "https://beachd.example.org")
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	nonce := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(readAll(t, res))[1]
	req, _ := http.NewRequest("POST", link, strings.NewReader(url.Values{"decision": {"denied"}, "nonce": {nonce}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone) <script>")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if res, err = noRedirect.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	checkReceived(t, h, env, "appr-trail-link", "denied", alice)
	evs := h.trail("appr-trail-link")
	if got := trailKinds(evs); len(got) < 3 || !slices.Equal(got[:3], []string{"asked", "voted:decided", "decided"}) {
		t.Fatalf("trail %v", got)
	}
	if v := evs[1]; v.Actor != alice || v.Channel != ChannelLink || v.Evidence["userAgent"] != "Mozilla/5.0 (iPhone) <script>" || v.Evidence["decision"] != "denied" {
		t.Fatalf("link vote %+v", v)
	}
}

// An answer after expiresAt, before the sweeper: the approval expires on
// it, the vote is kept as late; the sweeper's expiry of another approval
// is in its trail too.
func TestTrailOfExpiries(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	hd := h.handle(h.ingest(h.suspend("appr-late"), email(alice))[0])
	h.clock.Advance(25 * time.Hour) // default expiry 24h
	if res := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<m>", Token: hd.Token, Text: "yes"}); res.Outcome != OutcomeExpired {
		t.Fatalf("%+v", res)
	}
	h.settle()
	got := trailKinds(h.trail("appr-late"))
	if len(got) < 3 || !slices.Equal(got[:3], []string{"asked", "expired", "voted:ignored:late"}) {
		t.Fatalf("trail %v", got)
	}
	env := h.suspend("appr-swept")
	h.ingest(env, sms(aliceNum))
	h.clock.Advance(25 * time.Hour)
	if n, err := NewSweeper(h.svc).Sweep(h.ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	h.settle()
	evs := h.trail("appr-swept")
	if got := trailKinds(evs); len(got) < 2 || !slices.Equal(got[:2], []string{"asked", "expired"}) || evs[1].Actor != DecidedByExpiry {
		t.Fatalf("trail %v, %+v", got, evs)
	}
}

// An operator's withdrawal is in the trail, and a vote after it is kept as
// ignored: withdrawn.
func TestTrailOfAWithdrawal(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	hs := h.handle(h.ingest(h.suspend("appr-void"), sms(aliceNum))[0])
	if _, err := h.svc.Decide(h.ctx, "appr-void", "void", "booked by phone", "ops"); err != nil {
		t.Fatal(err)
	}
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "SM9", Text: "yes " + hs.Code}); res.Outcome != OutcomeAlreadyDecided {
		t.Fatalf("%+v", res)
	}
	evs := h.trail("appr-void")
	if got := trailKinds(evs); !slices.Equal(got, []string{"asked", "withdrawn", "voted:ignored:withdrawn"}) {
		t.Fatalf("trail %v", got)
	}
	if evs[1].Actor != "operator:ops" || evs[1].Evidence["reason"] != "booked by phone" {
		t.Fatalf("withdrawn %+v", evs[1])
	}
}

// A channel that passes more evidence than an event holds, or a key the
// store would refuse, cannot make the decision fail: the vote keeps what
// fits.
func TestTooMuchEvidenceStillDecides(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-ev")
	hs := h.handle(h.ingest(env, sms(aliceNum))[0])
	ev := map[string]string{"": "x", strings.Repeat("k", 300): "y"}
	for i := range 20 {
		ev[fmt.Sprint("e", i)] = "v"
	}
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "SM1", Text: "yes " + hs.Code, Evidence: ev}); res.Outcome != OutcomeDecided {
		t.Fatalf("%+v", res)
	}
	evs := h.trail("appr-ev")
	if got := trailKinds(evs); len(got) < 3 || got[1] != "voted:decided" || len(evs[1].Evidence) > store.MaxEventKeys {
		t.Fatalf("trail %v, vote evidence %v", got, evs[1].Evidence)
	}
}
