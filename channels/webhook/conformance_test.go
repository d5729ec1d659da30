package webhook

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/channeltest"
)

// httpPeer is an endpoint as a conformance peer: webhook-id headers are its
// keys (of the requests it accepted, or hung on).
type httpPeer struct {
	mu   sync.Mutex
	fail channeltest.Failure
	hang chan struct{}
	keys []string
}

func newHTTPPeer() *httpPeer { return &httpPeer{hang: make(chan struct{})} }

func (p *httpPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	f, hang := p.fail, p.hang
	switch f {
	case 0:
		p.keys = append(p.keys, r.Header.Get(HeaderID))
		p.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	case channeltest.Hang:
		p.keys = append(p.keys, r.Header.Get(HeaderID))
	}
	p.mu.Unlock()
	switch f {
	case channeltest.Permanent:
		http.Error(w, "bad request", http.StatusBadRequest)
	case channeltest.Temporary:
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	case channeltest.Hang:
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}
}

func (p *httpPeer) Fail(f channeltest.Failure) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = f
}

func (p *httpPeer) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail == channeltest.Hang {
		close(p.hang)
		p.hang = make(chan struct{})
	}
	p.fail = 0
}

func (p *httpPeer) Keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

func TestDelivererConformance(t *testing.T) {
	channeltest.Run(t, channeltest.Subject{Channel: "webhook", To: "ops",
		New: func(t *testing.T) (channels.Deliverer, channeltest.Peer) {
			p := newHTTPPeer()
			srv := httptest.NewServer(p)
			t.Cleanup(srv.Close)
			t.Cleanup(p.Heal)
			return newDeliverer(t, newClock(), srv.URL, func(_ *Config, ep *Endpoint) { ep.Timeout = 10 * time.Second }), p
		}})
}
