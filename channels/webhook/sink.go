package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// SinkConfig configures a Sink. The zero value of each field means its
// default.
type SinkConfig struct {
	// Secrets verify the signatures; with none, every webhook is recorded
	// as unverified.
	Secrets []Secret
	// Tolerance for webhook-timestamp; default DefaultTolerance.
	Tolerance time.Duration
	// Keep is how many received webhooks are kept for listing; default 1000.
	Keep int
	// MaxIDs bounds the distinct webhook-ids remembered for duplicate
	// counting; default 1,000,000 (past it, new ids are counted as unique
	// without being remembered).
	MaxIDs int
	// MaxBody bounds a request body; default envelope.DefaultLimits.MaxBytes
	// plus 64 KiB for the wrapper.
	MaxBody int64
	// MaxKeptEnvelope bounds the envelope kept per record; a larger one is
	// counted but not kept (EnvelopeBytes says how big it was). Default
	// 256 KiB, so that Keep records stay small.
	MaxKeptEnvelope int
	// RejectUnverified answers 401 to webhooks that fail verification
	// (they are still recorded); by default every POST gets 204.
	RejectUnverified bool
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Received is one webhook the sink got.
type Received struct {
	ID         string          `json:"id"`
	Timestamp  string          `json:"timestamp"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Verified   bool            `json:"verified"`
	Error      string          `json:"error,omitempty"`
	Duplicate  bool            `json:"duplicate"`
	Type       string          `json:"type,omitempty"`
	DeliveryID string          `json:"deliveryId,omitempty"`
	Envelope   json.RawMessage `json:"envelope,omitempty"`
	// EnvelopeBytes is the envelope's size; when it is over MaxKeptEnvelope
	// the envelope itself is not kept.
	EnvelopeBytes int `json:"envelopeBytes"`
}

// SinkStats are the sink's counters.
type SinkStats struct {
	Total      int `json:"total"`
	Unique     int `json:"unique"`
	Duplicates int `json:"duplicates"`
	Unverified int `json:"unverified"`
}

// Sink is an http.Handler that receives webhooks as a receiver would: POST
// verifies the Standard Webhooks signature, records the webhook (the last
// Keep of them) and counts duplicates by webhook-id; GET lists what was
// received as JSON. It serves `beachd dev` and tests.
type Sink struct {
	cfg SinkConfig

	mu     sync.Mutex
	ring   []Received // circular, len ≤ Keep
	next   int
	seen   map[string]int
	stats  SinkStats
	notify chan struct{} // closed and replaced on every receipt
}

// NewSink returns an empty sink.
func NewSink(cfg SinkConfig) *Sink {
	if cfg.Keep <= 0 {
		cfg.Keep = 1000
	}
	if cfg.MaxIDs <= 0 {
		cfg.MaxIDs = 1_000_000
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = envelope.DefaultLimits.MaxBytes + 64<<10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxKeptEnvelope <= 0 {
		cfg.MaxKeptEnvelope = 256 << 10
	}
	return &Sink{cfg: cfg, seen: map[string]int{}, notify: make(chan struct{})}
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		s.receive(w, r)
	case http.MethodGet, http.MethodHead:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			SinkStats
			Received []Received `json:"received"`
		}{s.Stats(), s.Received()})
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *Sink) receive(w http.ResponseWriter, r *http.Request) {
	b, err := envelope.ReadLimited(r.Body, s.cfg.MaxBody)
	if err != nil {
		var tl *envelope.TooLargeError
		if errors.As(err, &tl) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	now := s.cfg.Now()
	rec := Received{ID: r.Header.Get(HeaderID), Timestamp: r.Header.Get(HeaderTimestamp), ReceivedAt: now}
	if err := Verify(s.cfg.Secrets, r.Header, b, now, s.cfg.Tolerance); err != nil {
		rec.Error = err.Error()
	} else {
		rec.Verified = true
	}
	var wb struct {
		Type string `json:"type"`
		Data struct {
			DeliveryID string          `json:"deliveryId"`
			Envelope   json.RawMessage `json:"envelope"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &wb); err == nil {
		rec.Type, rec.DeliveryID, rec.EnvelopeBytes = wb.Type, wb.Data.DeliveryID, len(wb.Data.Envelope)
		if len(wb.Data.Envelope) <= s.cfg.MaxKeptEnvelope {
			rec.Envelope = wb.Data.Envelope
		}
	} else if rec.Error == "" {
		rec.Error = "body is not a webhook JSON object"
	}
	s.record(&rec)
	if !rec.Verified && s.cfg.RejectUnverified {
		http.Error(w, "signature verification failed", http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sink) record(rec *Received) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Total++
	if !rec.Verified {
		s.stats.Unverified++
	}
	if n, ok := s.seen[rec.ID]; ok {
		s.seen[rec.ID] = n + 1
		rec.Duplicate = true
		s.stats.Duplicates++
	} else {
		if len(s.seen) < s.cfg.MaxIDs {
			s.seen[rec.ID] = 1
		}
		s.stats.Unique++
	}
	if len(s.ring) < s.cfg.Keep {
		s.ring = append(s.ring, *rec)
	} else {
		s.ring[s.next] = *rec
	}
	s.next = (s.next + 1) % s.cfg.Keep
	close(s.notify)
	s.notify = make(chan struct{})
}

// Received returns the kept webhooks, oldest first.
func (s *Sink) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Received, 0, len(s.ring))
	if len(s.ring) < s.cfg.Keep {
		return append(out, s.ring...)
	}
	out = append(out, s.ring[s.next:]...)
	return append(out, s.ring[:s.next]...)
}

// Stats returns the counters.
func (s *Sink) Stats() SinkStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Count is how many times webhook-id id was received.
func (s *Sink) Count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[id]
}

// Changed returns a channel closed at the next receipt, so that a waiter can
// poll Stats without sleeping.
func (s *Sink) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notify
}

// String summarises the sink for a banner line.
func (s *Sink) String() string {
	st := s.Stats()
	return "webhook sink: " + strconv.Itoa(st.Total) + " received, " + strconv.Itoa(st.Duplicates) + " duplicates"
}
