package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/cool-ai/beachd/store"
)

// Live figures. The pages show the figures of the moment they were built;
// console.js then listens to /ui/events (server-sent events, one "pulse"
// event whenever the figures change) or, where EventSource is missing or
// keeps failing, polls /ui/pulse. A page that marks a region live reloads
// that region when the figures move. The figures are computed at most once
// per Config.Pulse whoever asks, so many open consoles cost one scan.

// Pulse is the live figures.
type Pulse struct {
	Queued   int `json:"queued"`
	Sending  int `json:"sending"`
	Retrying int `json:"retrying"`
	Dead     int `json:"dead"`
	Sent1h   int `json:"sent1h"`
	Sent24h  int `json:"sent24h"`
	Dead1h   int `json:"dead1h"`
	Dead24h  int `json:"dead24h"`
	Pending  int `json:"pending"`
	// Version changes whenever a delivery or approval changes state.
	Version string `json:"version"`
}

type pulse struct {
	c    *Console
	mu   sync.Mutex
	at   time.Time
	last Pulse
}

func newPulse(c *Console) *pulse { return &pulse{c: c} }

func (p *pulse) get(ctx context.Context) (Pulse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.c.cfg.Now()
	if !p.at.IsZero() && now.Sub(p.at) < p.c.cfg.Pulse && now.After(p.at) {
		return p.last, nil
	}
	st, err := p.c.deps.DB.DeliveryStats(ctx, now)
	if err != nil {
		return Pulse{}, err
	}
	out := Pulse{Queued: st.ByState[store.StateQueued], Sending: st.ByState[store.StateSending],
		Retrying: st.ByState[store.StateRetrying], Dead: st.Dead, Sent1h: st.Sent1h, Sent24h: st.Sent24h,
		Dead1h: st.Dead1h, Dead24h: st.Dead24h}
	var decided int
	if vs, err := p.c.deps.Approvals.List(ctx, store.ApprovalPending, "", 1000); err == nil {
		out.Pending = len(vs)
	}
	if vs, err := p.c.deps.Approvals.ListByInjection(ctx, "done", 1000); err == nil {
		decided = len(vs)
	}
	out.Version = fmt.Sprintf("%d.%d.%d.%d.%d.%d.%d", out.Queued, out.Sending, out.Retrying, out.Dead,
		st.ByState[store.StateSent], out.Pending, decided)
	p.at, p.last = now, out
	return out, nil
}

func (c *Console) pulseJSON(w http.ResponseWriter, r *http.Request, id identity) {
	p, err := c.pulse.get(r.Context())
	if err != nil {
		c.log.Error("console pulse", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(p)
}

// events streams the figures as server-sent events until the client goes
// or the session ends.
func (c *Console) events(w http.ResponseWriter, r *http.Request, id identity) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here; poll /ui/pulse", http.StatusNotImplemented)
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, "retry: 5000\n\n")
	fl.Flush()
	t := time.NewTicker(c.cfg.Pulse)
	defer t.Stop()
	// An open stream outlives the server's write timeout; each write gets
	// its own deadline instead.
	stop := time.Now().Add(c.cfg.SessionLifetime)
	last := ""
	for {
		if id.session != "" {
			if _, ok := c.readSession(id.session); !ok {
				return
			}
		}
		p, err := c.pulse.get(r.Context())
		if err == nil && p.Version != last {
			last = p.Version
			b, _ := json.Marshal(p)
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprintf(w, "event: pulse\ndata: %s\n\n", b); err != nil {
				return
			}
			fl.Flush()
		}
		if time.Now().After(stop) {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}
