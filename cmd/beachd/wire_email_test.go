package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

func TestWireEmailDevAndConfigured(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	newApp := func(cfg *config.Config, dev bool) *app {
		return &app{cfg: cfg, log: slog.New(slog.DiscardHandler), now: time.Now, dev: dev, db: db,
			registry: envelope.NewRegistry(), deliverers: map[string]channels.Deliverer{}, policies: map[string]channels.Policy{}}
	}
	// Without an email section, serve has no email channel ...
	a := newApp(&config.Config{}, false)
	if err := a.wireEmail(); err != nil || a.deliverers["email"] != nil {
		t.Fatalf("err %v, deliverer %v", err, a.deliverers["email"])
	}
	// ... and dev runs the embedded mail server with sender and intake.
	a = newApp(&config.Config{}, true)
	if err := a.wireEmail(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range a.workers {
		names = append(names, w.name)
	}
	if a.deliverers["email"] == nil || strings.Join(names, ",") != "email-dev-server,email-intake" {
		t.Fatalf("workers %v", names)
	}
	// The sender's pool is closed after the workers stop, not as one.
	if len(a.closers) != 1 || a.closers[0].name != "email sender" {
		t.Fatalf("closers %+v", a.closers)
	}
	if b := strings.Join(a.banner, "\n"); !strings.Contains(b, "you@beachd.localhost") || !strings.Contains(b, "SMTP 127.0.0.1:") {
		t.Fatalf("banner %q", b)
	}
	// A configured section without imap: sender only, with the lifetime.
	a = newApp(&config.Config{Email: &config.EmailConfig{From: "a@b.org", Lifetime: 48 * time.Hour,
		SMTP: config.SMTPConfig{Host: "127.0.0.1", Port: 2525, TLS: "none"}}}, false)
	if err := a.wireEmail(); err != nil {
		t.Fatal(err)
	}
	if a.deliverers["email"] == nil || len(a.workers) != 0 || len(a.closers) != 1 || a.policies["email"].Lifetime != 48*time.Hour {
		t.Fatalf("workers %d closers %d policy %+v", len(a.workers), len(a.closers), a.policies["email"])
	}
}

// The fetch client the email channel attaches artifacts with is built
// from fetch.allow: a host listed there may be dialled.
func TestFetchClientFromConfig(t *testing.T) {
	cfg, err := config.Parse([]byte("api_keys: [\"0123456789abcdef\"]\nfetch: { allow: [files.internal.example, 10.8.0.0/16, \"fd00:1::/32\"] }\n"), "beachd.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := newFetchClient(cfg.Fetch); err != nil || !f.Policy().HostAllowed("files.internal.example") {
		t.Fatalf("client: %v", err)
	}
}
