// Package channeltest is the conformance suite every Deliverer passes: the
// contract of channels.Deliverer checked against the deliverer's own fake
// provider. Each channel's tests build the deliverer and its provider the
// way their other tests do, wrap the provider in a Peer, and call Run.
//
// The checks:
//
//   - stable-id: two attempts of one delivery present the provider with the
//     same id, and another delivery with another one (Message-ID,
//     webhook-id, …): a repeat is recognisable.
//   - classification: a failure the provider reports as final is Permanent,
//     one it reports as passing is not, and the next attempt after it goes
//     through.
//   - deadline: when the provider hangs, Deliver returns within its
//     context's deadline (and a little scheduling slack), with a temporary
//     error, MaybeSent when the provider did get the message.
//   - maybe-sent: an attempt of a delivery marked MaybeSent after its
//     message reached the provider sends nothing new, or the same message
//     under the same id; and a MaybeSent delivery whose message never
//     reached the provider is sent, once.
//
// Production code never imports this package.
package channeltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Failure is a way the provider fails the sends after Peer.Fail.
type Failure int

const (
	// Temporary: the provider refuses for now (SMTP 4xx, HTTP 503, Twilio
	// 5xx).
	Temporary Failure = iota + 1
	// Permanent: the provider refuses for good (SMTP 5xx, HTTP 400, Twilio
	// 400 with an error code).
	Permanent
	// Hang: the provider answers nothing until the client gives up.
	Hang
)

func (f Failure) String() string {
	switch f {
	case Temporary:
		return "temporary"
	case Permanent:
		return "permanent"
	case Hang:
		return "hang"
	}
	return "none"
}

// Peer is the fake provider behind one deliverer under test.
type Peer interface {
	// Fail makes every later send fail in the given way, until Heal.
	Fail(f Failure)
	// Heal makes the provider accept again (and releases hung requests).
	Heal()
	// Keys are the provider-facing ids of the messages the provider has
	// accepted or taken in, oldest first: what lets it recognise a repeat.
	Keys() []string
}

// Check names, for Subject.Skip.
const (
	CheckStableID       = "stable-id"
	CheckClassification = "classification"
	CheckDeadline       = "deadline"
	CheckMaybeSent      = "maybe-sent"
)

// Subject is one deliverer under test.
type Subject struct {
	// Channel is the channel of the jobs (a name envelope.Channel knows).
	Channel string
	// To is a recipient on the channel: an address, a number or an
	// endpoint name.
	To string
	// New builds a fresh deliverer and its provider; every check gets its
	// own. The deliverer's own attempt timeout should be well above a
	// second, so that the deadline check tests the context's.
	New func(t *testing.T) (channels.Deliverer, Peer)
	// Envelope, when set, is the envelope of the jobs; default a short
	// text response.
	Envelope *envelope.Envelope
	// Skip names checks the subject cannot take, each with the reason
	// (a recorder has no provider that can fail).
	Skip map[string]string
	// Deadline bounds the hung attempt; default 500ms.
	Deadline time.Duration
}

// Run runs every check against s.
func Run(t *testing.T, s Subject) {
	t.Helper()
	if _, ok := envelope.Channel(s.Channel); !ok {
		t.Fatalf("channeltest: channel %q has no spec", s.Channel)
	}
	if s.Deadline <= 0 {
		s.Deadline = 500 * time.Millisecond
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, Subject)
	}{
		{CheckStableID, stableID},
		{CheckClassification, classification},
		{CheckDeadline, deadline},
		{CheckMaybeSent, maybeSent},
	} {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := s.Skip[c.name]; ok {
				if why == "" {
					t.Fatalf("skip of %s without a reason", c.name)
				}
				t.Skip(why)
			}
			c.run(t, s)
		})
	}
}

func (s Subject) job(id string, attempt int) *channels.Job {
	env := s.Envelope
	if env == nil {
		text := "Your table for two is booked for Friday at 19:30."
		env = &envelope.Envelope{Role: "agent",
			Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": envelope.PartResponse}}},
			Meta: envelope.Meta{SessionID: "s1", TurnID: "t1", FinalizedBy: "complete",
				ProducedAt: time.Now().Add(-time.Minute).UTC().Truncate(time.Second)}}
	}
	d := &store.Delivery{ID: id, EnvelopeID: "env_" + id, Channel: s.Channel, To: s.To,
		CreatedAt: time.Now().Add(-time.Minute), Attempts: attempt - 1}
	return &channels.Job{Delivery: d, Envelope: env, Attempt: attempt}
}

func deliver(t *testing.T, d channels.Deliverer, j *channels.Job) (*channels.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return d.Deliver(ctx, j)
}

func mustDeliver(t *testing.T, d channels.Deliverer, j *channels.Job) *channels.Result {
	t.Helper()
	res, err := deliver(t, d, j)
	if err != nil {
		t.Fatalf("deliver %s attempt %d: %v", j.Delivery.ID, j.Attempt, err)
	}
	if res == nil {
		t.Fatalf("deliver %s attempt %d: nil result and nil error", j.Delivery.ID, j.Attempt)
	}
	return res
}

// stableID: attempts of one delivery carry one id; another delivery
// another.
func stableID(t *testing.T, s Subject) {
	d, p := s.New(t)
	mustDeliver(t, d, s.job("dlv_conf_a", 1))
	mustDeliver(t, d, s.job("dlv_conf_a", 2))
	mustDeliver(t, d, s.job("dlv_conf_b", 1))
	k := p.Keys()
	if len(k) != 3 {
		t.Fatalf("provider took %d messages for three sends: %q", len(k), k)
	}
	if k[0] == "" || k[0] != k[1] {
		t.Errorf("two attempts of one delivery carried ids %q and %q, want one non-empty id", k[0], k[1])
	}
	if k[2] == k[0] {
		t.Errorf("two deliveries carried the same id %q", k[0])
	}
}

// classification: permanent and temporary failures are told apart, and
// the provider's recovery is an attempt that goes through.
func classification(t *testing.T, s Subject) {
	for _, f := range []Failure{Permanent, Temporary} {
		t.Run(f.String(), func(t *testing.T) {
			d, p := s.New(t)
			p.Fail(f)
			res, err := deliver(t, d, s.job("dlv_conf_c", 1))
			if err == nil {
				t.Fatalf("a %s provider failure returned no error (result %+v)", f, res)
			}
			var ce *channels.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err %v is not a *channels.Error: the channel did not classify it", err)
			}
			if ce.Permanent != (f == Permanent) {
				t.Errorf("a %s provider failure came back permanent=%v: %v", f, ce.Permanent, err)
			}
			p.Heal()
			mustDeliver(t, d, s.job("dlv_conf_c", 2))
			if n := len(p.Keys()); n != 1 {
				t.Errorf("provider took %d messages after one failed and one good attempt", n)
			}
		})
	}
}

// deadline: a hung provider costs no more than the context allows.
func deadline(t *testing.T, s Subject) {
	d, p := s.New(t)
	p.Fail(Hang)
	t.Cleanup(p.Heal)
	before := len(p.Keys())
	ctx, cancel := context.WithTimeout(context.Background(), s.Deadline)
	defer cancel()
	start := time.Now()
	res, err := d.Deliver(ctx, s.job("dlv_conf_d", 1))
	took := time.Since(start)
	if slack := s.Deadline + 1500*time.Millisecond; took > slack {
		t.Errorf("Deliver took %v against a %v deadline", took, s.Deadline)
	}
	if took < s.Deadline/2 {
		t.Errorf("Deliver returned after %v, before the %v deadline: the provider did not hang (or the deliverer's own timeout is shorter), so nothing was checked", took, s.Deadline)
	}
	if err == nil {
		t.Fatalf("a hung provider returned no error (result %+v)", res)
	}
	ce := channels.AsError(err)
	if ce.Permanent {
		t.Errorf("a hung provider is a permanent failure: %v", err)
	}
	if len(p.Keys()) > before && !ce.MaybeSent {
		t.Errorf("the provider took the message in, and the error is not MaybeSent: %v", err)
	}
}

// maybeSent: a repeat after an attempt that reached the provider is
// recognisable, and one after an attempt that did not is sent.
func maybeSent(t *testing.T, s Subject) {
	t.Run("reached", func(t *testing.T) {
		d, p := s.New(t)
		first := mustDeliver(t, d, s.job("dlv_conf_e", 1))
		j := s.job("dlv_conf_e", 2)
		j.Delivery.MaybeSent, j.Delivery.ProviderID = true, first.ProviderID
		again := mustDeliver(t, d, j)
		k := p.Keys()
		switch {
		case len(k) == 1:
			if again.ProviderID != first.ProviderID {
				t.Errorf("the repeat sent nothing but reports provider id %q, not the first attempt's %q", again.ProviderID, first.ProviderID)
			}
		case len(k) == 2:
			if k[0] != k[1] {
				t.Errorf("the repeat of a maybe-sent delivery went out under a new id %q (first %q)", k[1], k[0])
			}
		default:
			t.Errorf("provider took %d messages for a send and its maybe-sent repeat", len(k))
		}
	})
	t.Run("not-reached", func(t *testing.T) {
		d, p := s.New(t)
		j := s.job("dlv_conf_f", 2)
		j.Delivery.MaybeSent = true
		mustDeliver(t, d, j)
		if n := len(p.Keys()); n != 1 {
			t.Errorf("a maybe-sent delivery the provider never got: %d messages taken, want 1", n)
		}
	})
}
