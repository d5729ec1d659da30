package email

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// TestSlowMailServerLeavesWorkersForOtherChannels: with the mail server
// holding its answer, at most twice the pool's size of email jobs are
// handed out, so a webhook queued behind many emails still goes out while
// every one of them waits. Before the sender admitted jobs, all four
// workers sat waiting for the one pooled connection and the webhook waited
// for the mail server's timeout.
func TestSlowMailServerLeavesWorkersForOtherChannels(t *testing.T) {
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	hang := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			be.Set(func(s *smtptest.Server) { s.Hang = nil })
			close(hang) // the message held is accepted
		}
	}
	defer release()
	be.Set(func(s *smtptest.Server) { s.Hang = hang })
	mail := newTestSender(t, port, func(c *SenderConfig) { c.PoolSize = 1; c.Timeout = time.Minute; c.Now = time.Now }, false)

	hooked := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hooked <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	secret, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := webhook.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := webhook.New(webhook.Config{Registry: envelope.NewRegistry(), Endpoints: []webhook.Endpoint{{Name: "ops", URL: srv.URL, Signer: signer}}})
	if err != nil {
		t.Fatal(err)
	}

	db := storetest.Open(t, bolt.Options{})
	env, _ := json.Marshal(textEnvelope("Your booking is confirmed."))
	var to []store.NewDelivery
	for i := range 8 {
		to = append(to, store.NewDelivery{Channel: "email", To: fmt.Sprintf("guest%d@example.com", i)})
	}
	ctx := context.Background()
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: env, Deliveries: to}); err != nil {
		t.Fatal(err)
	}
	// Later, so that it is due after every email.
	time.Sleep(10 * time.Millisecond)
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: env, Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ops"}}}); err != nil {
		t.Fatal(err)
	}

	disp, err := channels.NewDispatcher(channels.DispatcherConfig{Workers: 4, IdleWait: 50 * time.Millisecond,
		Policies: map[string]channels.Policy{"email": {Delays: []time.Duration{10 * time.Millisecond}, Lifetime: time.Hour, Timeout: time.Minute}}},
		db, map[string]channels.Deliverer{"email": mail, "webhook": hooks}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- disp.Run(runCtx) }()
	defer func() {
		release()
		stop()
		<-done
	}()

	select {
	case <-hooked:
	case <-time.After(15 * time.Second):
		t.Fatal("the webhook did not go out while the mail server held its answer")
	}
	if n := len(be.Raw()); n != 0 {
		t.Fatalf("%d emails accepted before the server was released", n)
	}
	release()
	deadline := time.Now().Add(30 * time.Second)
	for len(be.Raw()) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 8 emails accepted after the release", len(be.Raw()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
