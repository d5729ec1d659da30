package channels

import (
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// A deliverer for a channel that has no spec and no configured policy is
// refused when the dispatcher is built, naming the channel, instead of
// retrying on another channel's schedule.
func TestDispatcherRefusesChannelWithoutPolicy(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	_, err := NewDispatcher(DispatcherConfig{}, db, map[string]Deliverer{"telegram": &scripted{}}, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `"telegram"`) {
		t.Fatalf("NewDispatcher with a telegram deliverer and no policy: err = %v, want one naming the channel", err)
	}
	// A configured policy makes the same channel acceptable.
	p := Policy{Delays: []time.Duration{time.Second}, Lifetime: time.Minute, Timeout: 3 * time.Second}
	d, err := NewDispatcher(DispatcherConfig{Policies: map[string]Policy{"telegram": p}}, db, map[string]Deliverer{"telegram": &scripted{}}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.cfg.policy("telegram").Timeout; got != 3*time.Second {
		t.Fatalf("telegram timeout %v, want the configured 3s", got)
	}
}

// Every channel's default policy is its spec's profile, and each known
// channel gets its own, not the webhook's.
func TestDefaultPoliciesFromSpecs(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	dels := map[string]Deliverer{}
	for _, n := range envelope.ChannelNames() {
		dels[n] = &scripted{}
	}
	d, err := NewDispatcher(DispatcherConfig{}, db, dels, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range envelope.ChannelNames() {
		spec, _ := envelope.Channel(n)
		got := d.cfg.policy(n)
		if got.Lifetime != spec.Profile.Lifetime || got.Timeout != spec.Profile.Timeout || len(got.Delays) != len(spec.Profile.Delays) {
			t.Errorf("%s: policy %+v, want the profile %+v", n, got, spec.Profile)
		}
	}
	if d.cfg.policy(envelope.ChannelSMS).Lifetime == WebhookPolicy.Lifetime {
		t.Errorf("sms uses the webhook lifetime")
	}
	if _, err := DefaultPolicy("telegram"); err == nil || !strings.Contains(err.Error(), `"telegram"`) {
		t.Errorf("DefaultPolicy(telegram) = %v, want an error naming it", err)
	}
}
