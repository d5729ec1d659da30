package twilio

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/channeltest"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
)

// noKey is why the Twilio deliverers skip the stable-id check.
const noKey = "the Messages API takes no idempotency key: a repeat is recognised by the SID recorded on the delivery and by a lookup of recent messages to the number (the maybe-sent check)"

// twilioPeer is the fake Twilio as a conformance peer: the SIDs of the
// messages it created are its keys.
type twilioPeer struct {
	f    *twiliotest.Server
	mu   sync.Mutex
	fail channeltest.Failure
}

func newTwilioPeer(t *testing.T) *twilioPeer {
	p := &twilioPeer{f: newFakeTwilio(t)}
	p.f.Fail = func(n int, to, body string) *twiliotest.Reply {
		p.mu.Lock()
		defer p.mu.Unlock()
		var r twiliotest.Reply
		switch p.fail {
		case channeltest.Permanent:
			r = twiliotest.Error(400, 21211, "The 'To' number is not a valid phone number.")
		case channeltest.Temporary:
			r = twiliotest.Error(503, 20503, "Service Unavailable")
		default:
			return nil
		}
		return &r
	}
	return p
}

func (p *twilioPeer) Fail(f channeltest.Failure) {
	if f == channeltest.Hang {
		// Only a queued reply hangs: the message is created all the
		// same, as Twilio does when its answer is lost.
		p.f.FailNext(twiliotest.Reply{Hang: true})
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = f
}

func (p *twilioPeer) Heal() { p.Fail(0) }

func (p *twilioPeer) Keys() []string {
	var out []string
	for _, m := range p.f.Created() {
		out = append(out, m.SID)
	}
	return out
}

func TestSMSConformance(t *testing.T) {
	channeltest.Run(t, channeltest.Subject{Channel: "sms", To: alice,
		Skip: map[string]string{channeltest.CheckStableID: noKey},
		New: func(t *testing.T) (channels.Deliverer, channeltest.Peer) {
			p := newTwilioPeer(t)
			d, err := NewSMS(testConfig(), Deps{Client: newTestClient(t, p.f.URL, 10*time.Second), Store: openStore(t), Limiter: fastLimiter()})
			if err != nil {
				t.Fatal(err)
			}
			return d, p
		}})
}

func TestWhatsAppConformance(t *testing.T) {
	channeltest.Run(t, channeltest.Subject{Channel: "whatsapp", To: alice,
		Skip: map[string]string{channeltest.CheckStableID: noKey},
		New: func(t *testing.T) (channels.Deliverer, channeltest.Peer) {
			p := newTwilioPeer(t)
			db := openStore(t)
			// The person wrote an hour ago: the window is open.
			if err := db.PutKV(context.Background(), windowKey(alice), []byte(time.Now().Add(-time.Hour).Format(time.RFC3339Nano))); err != nil {
				t.Fatal(err)
			}
			d, err := NewWhatsApp(testConfig(), Deps{Client: newTestClient(t, p.f.URL, 10*time.Second), Store: db, Limiter: fastLimiter()})
			if err != nil {
				t.Fatal(err)
			}
			return d, p
		}})
}

// The dev recorders stand in for Twilio under `beachd dev`: their SID is
// derived from the delivery id, so they take the id and maybe-sent checks;
// there is no provider to fail or hang.
func TestRecorderConformance(t *testing.T) {
	noProvider := "the recorder has no provider that can fail or hang"
	for _, ch := range []string{"sms", "whatsapp"} {
		t.Run(ch, func(t *testing.T) {
			channeltest.Run(t, channeltest.Subject{Channel: ch, To: alice,
				Skip: map[string]string{channeltest.CheckClassification: noProvider, channeltest.CheckDeadline: noProvider},
				New: func(t *testing.T) (channels.Deliverer, channeltest.Peer) {
					log := NewRecorderLog(100)
					d, err := NewRecorder(ch, openStore(t), log, defaultRender(t), nil)
					if err != nil {
						t.Fatal(err)
					}
					return d, recorderPeer{log}
				}})
		})
	}
}

// recorderPeer reads a RecorderLog: the recorded SIDs are its keys.
type recorderPeer struct{ log *RecorderLog }

func (recorderPeer) Fail(channeltest.Failure) {}
func (recorderPeer) Heal()                    {}
func (p recorderPeer) Keys() []string {
	var out []string
	for _, m := range p.log.Messages() {
		out = append(out, m.SID)
	}
	return out
}
