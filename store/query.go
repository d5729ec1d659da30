package store

import (
	"strings"
	"time"
)

// MaxScan bounds how many deliveries one operator query visits.
const MaxScan = 200_000

// MaxBulkRetry bounds how many dead deliveries one bulk retry makes due.
const MaxBulkRetry = 10_000

// DeliveryFilter selects deliveries. Zero fields select everything.
type DeliveryFilter struct {
	State   State
	Channel string
	Agent   string
	// To matches when the recipient contains it, ignoring case.
	To string
	// Since and Until bound CreatedAt (Since inclusive, Until exclusive).
	Since, Until time.Time
	// Before pages: only deliveries whose id sorts before it (older).
	Before string
}

// Match reports whether d passes every field of f but Before, which pages
// and is the backend's to apply.
func (f DeliveryFilter) Match(d *Delivery) bool {
	switch {
	case f.State != "" && d.State != f.State,
		f.Channel != "" && d.Channel != f.Channel,
		f.Agent != "" && d.Agent != f.Agent,
		f.To != "" && !strings.Contains(strings.ToLower(d.To), strings.ToLower(f.To)),
		!f.Since.IsZero() && d.CreatedAt.Before(f.Since),
		!f.Until.IsZero() && !d.CreatedAt.Before(f.Until):
		return false
	}
	return true
}

// ChannelStats are one channel's counts.
type ChannelStats struct {
	Channel string        `json:"channel"`
	ByState map[State]int `json:"byState"`
	// Sent1h/24h count deliveries sent in the last hour/day; Dead1h/24h those
	// that died; Failed1h attempts that failed (retry or dead) in the last
	// hour.
	Sent1h   int `json:"sent1h"`
	Sent24h  int `json:"sent24h"`
	Dead1h   int `json:"dead1h"`
	Dead24h  int `json:"dead24h"`
	Retrying int `json:"retrying"`
	// LastError is the error of the most recently updated delivery that has
	// one, and when.
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	LastSentAt  time.Time `json:"lastSentAt,omitzero"`
}

// DeliveryStats is the overview: queue depth by state, rates and dead
// letters, overall and per channel.
type DeliveryStats struct {
	At        time.Time       `json:"at"`
	ByState   map[State]int   `json:"byState"`
	Channels  []*ChannelStats `json:"channels"`
	Created1h int             `json:"created1h"`
	Created24 int             `json:"created24h"`
	Sent1h    int             `json:"sent1h"`
	Sent24h   int             `json:"sent24h"`
	Dead1h    int             `json:"dead1h"`
	Dead24h   int             `json:"dead24h"`
	Dead      int             `json:"dead"`
	// Truncated: more than MaxScan deliveries; the figures cover the newest.
	Truncated bool `json:"truncated,omitempty"`
}
