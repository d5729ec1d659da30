package twilio

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// TestAdmitReservesRateLimitSlots: the dispatcher is handed only jobs whose
// first message has a slot of the sender's rate limit within admitAhead;
// Deliver uses that slot instead of taking another, and a slot no message
// used goes back when the job is done. Before, every worker could take a
// job and then wait in the limiter for up to the attempt's timeout, which
// left none for the other channels.
func TestAdmitReservesRateLimitSlots(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var slept []time.Duration
	lim := NewLimiter(LimiterConfig{PerSecond: 1, Burst: 1, Now: func() time.Time { return now },
		Sleep: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			slept = append(slept, d)
			mu.Unlock()
			return nil
		}})
	f := newFakeTwilio(t)
	d, err := NewSMS(testConfig(), Deps{Client: newTestClient(t, f.URL, 5*time.Second), Store: openStore(t), Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	del := func(id string) *store.Delivery {
		return &store.Delivery{ID: id, Channel: envelope.ChannelSMS, To: alice}
	}

	// One message a second: slots now, in 1 s and in 2 s are within
	// admitAhead; the fourth is not.
	for i, want := range []bool{true, true, true, false} {
		if got := d.Admit(del(string(rune('a' + i)))); got != want {
			t.Fatalf("Admit #%d = %v, want %v", i+1, got, want)
		}
	}
	// b's message waits for b's slot (1 s ahead) and takes no other.
	if _, err := d.Deliver(context.Background(), job("b", envelope.ChannelSMS, alice, "hello")); err != nil {
		t.Fatal(err)
	}
	d.Done(del("b"))
	mu.Lock()
	if len(slept) != 1 || slept[0] != time.Second {
		t.Errorf("Deliver slept %v, want [1s]", slept)
	}
	mu.Unlock()
	if d.Admit(del("e")) {
		t.Fatal("admitted a job beyond admitAhead after b used its own slot")
	}
	// c never sends (shutdown, a failed render…): its slot goes back.
	d.Done(del("c"))
	if !d.Admit(del("f")) {
		t.Fatal("the slot c gave back was not offered again")
	}
	// A job delivered without Admit (the CLI's test send, say) still waits
	// in the limiter as before: here, beyond the 5 s its deadline leaves,
	// so it is put off with a RetryAfter rather than sent.
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second)
	defer cancel()
	_, err = d.Deliver(ctx, job("g", envelope.ChannelSMS, alice, "hello"))
	if e := channels.AsError(err); err == nil || e.RetryAfter != 3*time.Second {
		t.Fatalf("a job without a slot: err %v, want a RetryAfter of 3s", err)
	}
	if n := f.Posts(); n != 1 {
		t.Fatalf("%d messages sent, want 1", n)
	}
}

// otherChannel stands for any channel queued behind the SMS: it notes when
// its first job arrived.
type otherChannel struct{ got chan struct{} }

func (o *otherChannel) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	select {
	case o.got <- struct{}{}:
	default:
	}
	return &channels.Result{Receipt: channels.Receipt{Data: map[string]any{}, Meta: map[string]any{"source": "test"}}}, nil
}

// TestSMSBroadcastDoesNotHoldUpOtherChannels: 7,000 SMS to distinct numbers
// paced at one a second are due before a webhook. The SMS sender refuses
// for its whole channel, so each claim passes over the SMS backlog at once
// and the webhook goes out, instead of waiting until fewer than a claim's
// scan limit (about 6,000 entries) of SMS are left: hours at this pace.
func TestSMSBroadcastDoesNotHoldUpOtherChannels(t *testing.T) {
	db := openStore(t)
	f := newFakeTwilio(t)
	sms, err := NewSMS(testConfig(), Deps{Client: newTestClient(t, f.URL, 5*time.Second), Store: db, Limiter: NewLimiter(LimiterConfig{PerSecond: 1, Burst: 1})})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := json.Marshal(textEnvelope("Your parcel is on its way."))
	var ins []store.Ingest
	for i := range 7000 {
		ins = append(ins, store.Ingest{Envelope: env, Deliveries: []store.NewDelivery{{Channel: "sms", To: fmt.Sprintf("+4477009%05d", i)}}})
	}
	ctx := context.Background()
	if _, err := db.IngestBulk(ctx, ins); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // due after every SMS
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: env, Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ops"}}}); err != nil {
		t.Fatal(err)
	}
	other := &otherChannel{got: make(chan struct{}, 1)}
	d, err := channels.NewDispatcher(channels.DispatcherConfig{}, db, map[string]channels.Deliverer{"sms": sms, "webhook": other}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() { stop(); <-done }()
	select {
	case <-other.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook behind 7,000 paced SMS did not go out within 10 s")
	}
}
