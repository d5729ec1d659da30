package storetest

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/cool-ai/beachd/store"
)

// claimCases are the claim rules (store.SelectClaims) as a backend applies
// them.
var claimCases = []testCase{
	{"claim/jobs are taken in due order across channels", claimDueOrder},
	{"claim/at most max jobs", claimMax},
	{"claim/a refused recipient's later jobs are passed over without asking", claimRefuseRecipient},
	{"claim/a refused channel is closed for the claim", claimRefuseChannel},
	{"claim/Claim's admit false refuses the recipient", claimBoolAdmit},
}

func claimDueOrder(e *env) {
	want := e.ingestSpaced(to("email", "r0"), to("sms", "r1"), to("email", "r2"), to("webhook", "r3"), to("sms", "r4"))
	if got := e.claimIDs(3); !slices.Equal(got, want[:3]) {
		e.t.Fatalf("first claim %v, want %v", got, want[:3])
	}
	if got := e.claimIDs(3); !slices.Equal(got, want[3:]) {
		e.t.Fatalf("second claim %v, want %v", got, want[3:])
	}
	if at, ok := e.s.NextDue(); ok {
		e.t.Fatalf("NextDue %v with nothing due", at)
	}
}

func claimMax(e *env) {
	e.ingest(hooks(5)...)
	if got := e.claimIDs(2); len(got) != 2 {
		e.t.Fatalf("claim of 2 took %d", len(got))
	}
	if got := e.claimIDs(0); len(got) != 0 {
		e.t.Fatalf("claim of 0 took %d", len(got))
	}
	if got := e.claimIDs(10); len(got) != 3 {
		e.t.Fatalf("claim of 10 took %d of the 3 left", len(got))
	}
}

func claimRefuseRecipient(e *env) {
	jobs := e.ingestSpaced(to("webhook", "ep-a"), to("webhook", "ep-b"), to("webhook", "ep-a"), to("webhook", "ep-c"))
	asked := map[string]int{}
	got, err := e.s.ClaimAdmitting(e.ctx, 10, time.Minute, func(d *store.Delivery) store.Admission {
		asked[d.To]++
		if d.To == "ep-a" {
			return store.RefuseRecipient
		}
		return store.Admit
	})
	e.ok(err, "claim refusing ep-a")
	if !slices.Equal(ids(got), []string{jobs[1], jobs[3]}) || asked["ep-a"] != 1 {
		e.t.Fatalf("claimed %v, ep-a asked %d times; want ep-b and ep-c, ep-a asked once", ids(got), asked["ep-a"])
	}
	if got := e.claimIDs(10); !slices.Equal(got, []string{jobs[0], jobs[2]}) {
		e.t.Fatalf("ep-a's jobs after the refusal: %v, want %v", got, []string{jobs[0], jobs[2]})
	}
}

func claimRefuseChannel(e *env) {
	jobs := e.ingestSpaced(to("sms", "+1"), to("sms", "+2"), to("sms", "+3"), to("webhook", "ops"))
	asked := map[string]int{}
	got, err := e.s.ClaimAdmitting(e.ctx, 10, time.Minute, func(d *store.Delivery) store.Admission {
		asked[d.Channel]++
		if d.Channel == "sms" {
			return store.RefuseChannel
		}
		return store.Admit
	})
	e.ok(err, "claim refusing sms")
	if !slices.Equal(ids(got), jobs[3:]) || asked["sms"] != 1 {
		e.t.Fatalf("claimed %v, sms asked %d times; want the webhook, sms asked once", ids(got), asked["sms"])
	}
	if got := e.claimIDs(10); !slices.Equal(got, jobs[:3]) {
		e.t.Fatalf("sms jobs after the refusal: %v, want %v", got, jobs[:3])
	}
}

func claimBoolAdmit(e *env) {
	jobs := e.ingestSpaced(to("webhook", "ep-a"), to("webhook", "ep-b"), to("webhook", "ep-a"))
	got, err := e.s.Claim(e.ctx, 10, time.Minute, func(d *store.Delivery) bool { return d.To != "ep-a" })
	e.ok(err, "claim refusing ep-a")
	if !slices.Equal(ids(got), jobs[1:2]) {
		e.t.Fatalf("claimed %v, want only ep-b's job", ids(got))
	}
}

// providerCases are provider ids and provider statuses.
var providerCases = []testCase{
	{"provider/a recorded provider id finds its delivery on its channel", providerIDFinds},
	{"provider/every attempt's and part's provider id keeps finding the delivery", providerIDsOfAttempts},
	{"provider/status is recorded without changing the state", providerStatus},
}

func providerIDFinds(e *env) {
	res := e.ingest(to("sms", "+15550001111"))
	d := e.claim(1)[0]
	e.record(d, store.Outcome{State: store.StateSent, ProviderID: "SM1"})
	got, err := e.s.DeliveryByProviderID(e.ctx, "sms", "SM1")
	e.ok(err, "by provider id")
	if got.ID != res.Deliveries[0].ID || got.ProviderID != "SM1" || got.State != store.StateSent {
		e.t.Fatalf("by provider id: %+v", got)
	}
	_, err = e.s.DeliveryByProviderID(e.ctx, "whatsapp", "SM1")
	e.is(err, store.ErrNotFound, "provider id on another channel")
	_, err = e.s.DeliveryByProviderID(e.ctx, "sms", "SM2")
	e.is(err, store.ErrNotFound, "unknown provider id")
}

func providerIDsOfAttempts(e *env) {
	e.ingest(to("sms", "+15550001111"))
	d := e.claim(1)[0]
	e.record(d, store.Outcome{State: store.StateRetrying, NextAttemptAt: e.now(), ProviderID: "SM1", MaybeSent: true})
	d = e.claim(1)[0]
	if !d.MaybeSent || d.ProviderID != "SM1" {
		e.t.Fatalf("second claim %+v, want maybe sent with the first attempt's provider id", d)
	}
	receipt, _ := json.Marshal(map[string]any{"data": map[string]any{}, "meta": map[string]any{"parts": []string{"SM2", "SM3"}}})
	e.record(d, store.Outcome{State: store.StateSent, ProviderID: "SM2", Attempt: store.Attempt{Outcome: "sent", Receipt: receipt}})
	for _, pid := range []string{"SM1", "SM2", "SM3"} {
		got, err := e.s.DeliveryByProviderID(e.ctx, "sms", pid)
		e.ok(err, "by provider id "+pid)
		if got.ID != d.ID || got.ProviderID != "SM2" {
			e.t.Fatalf("%s found %+v", pid, got)
		}
	}
	atts, err := e.s.Attempts(e.ctx, d.ID)
	e.ok(err, "attempts")
	if len(atts) != 2 || !sameJSON(atts[1].Receipt, receipt) {
		e.t.Fatalf("attempts %+v", atts)
	}
}

func providerStatus(e *env) {
	e.ingest(to("sms", "+15550001111"))
	d := e.record(e.claim(1)[0], store.Outcome{State: store.StateSent, ProviderID: "SM1"})
	got, err := e.s.SetProviderStatus(e.ctx, d.ID, "delivered", "")
	e.ok(err, "set provider status")
	if got.ProviderStatus != "delivered" || got.State != store.StateSent {
		e.t.Fatalf("after status: %+v", got)
	}
	var seen string
	got, changed, err := e.s.UpdateProviderStatus(e.ctx, d.ID, func(d *store.Delivery) (string, string, bool) {
		seen = d.ProviderStatus
		return "", "", false
	})
	e.ok(err, "update provider status, declined")
	if changed || seen != "delivered" || got.ProviderStatus != "delivered" {
		e.t.Fatalf("declined update: changed %v, decide saw %q, delivery %+v", changed, seen, got)
	}
	got, changed, err = e.s.UpdateProviderStatus(e.ctx, d.ID, func(d *store.Delivery) (string, string, bool) {
		return "undelivered", "30003 unreachable", true
	})
	e.ok(err, "update provider status")
	if !changed || got.ProviderStatus != "undelivered" || got.LastError != "30003 unreachable" || got.State != store.StateSent {
		e.t.Fatalf("update: changed %v, delivery %+v", changed, got)
	}
	if stored := e.delivery(d.ID); stored.ProviderStatus != "undelivered" || stored.LastError != "30003 unreachable" {
		e.t.Fatalf("stored after update: %+v", stored)
	}
	_, err = e.s.SetProviderStatus(e.ctx, "dlv_missing", "delivered", "")
	e.is(err, store.ErrNotFound, "status of an unknown delivery")
}
