package store

import (
	"maps"
	"slices"
	"time"
)

// StatsCounter builds DeliveryStats as of a moment from the deliveries a
// backend hands it, newest first.
type StatsCounter struct {
	st       *DeliveryStats
	byCh     map[string]*ChannelStats
	h1, h24  time.Time
	scanned  int
	maxCount int
}

// NewStatsCounter counts as of now, over at most MaxScan deliveries.
func NewStatsCounter(now time.Time) *StatsCounter {
	return &StatsCounter{st: &DeliveryStats{At: now, ByState: map[State]int{}}, byCh: map[string]*ChannelStats{},
		h1: now.Add(-time.Hour), h24: now.Add(-24 * time.Hour), maxCount: MaxScan}
}

// Full reports that MaxScan deliveries were counted: the figures are then
// marked truncated, and the backend stops handing more.
func (c *StatsCounter) Full() bool {
	if c.scanned >= c.maxCount {
		c.st.Truncated = true
		return true
	}
	return false
}

// Add counts d in the overall and its channel's figures.
func (c *StatsCounter) Add(d *Delivery) {
	c.scanned++
	st := c.st
	cs := c.byCh[d.Channel]
	if cs == nil {
		cs = &ChannelStats{Channel: d.Channel, ByState: map[State]int{}}
		c.byCh[d.Channel] = cs
	}
	st.ByState[d.State]++
	cs.ByState[d.State]++
	if !d.CreatedAt.Before(c.h1) {
		st.Created1h++
	}
	if !d.CreatedAt.Before(c.h24) {
		st.Created24++
	}
	switch d.State {
	case StateSent:
		if !d.SentAt.Before(c.h1) {
			st.Sent1h++
			cs.Sent1h++
		}
		if !d.SentAt.Before(c.h24) {
			st.Sent24h++
			cs.Sent24h++
		}
		if d.SentAt.After(cs.LastSentAt) {
			cs.LastSentAt = d.SentAt
		}
	case StateDead:
		st.Dead++
		if !d.UpdatedAt.Before(c.h1) {
			st.Dead1h++
			cs.Dead1h++
		}
		if !d.UpdatedAt.Before(c.h24) {
			st.Dead24h++
			cs.Dead24h++
		}
	case StateRetrying:
		cs.Retrying++
	}
	if d.LastError != "" && d.State != StateSent && d.UpdatedAt.After(cs.LastErrorAt) {
		cs.LastError, cs.LastErrorAt = d.LastError, d.UpdatedAt
	}
}

// Stats returns the figures, channels in name order.
func (c *StatsCounter) Stats() *DeliveryStats {
	c.st.Channels = c.st.Channels[:0]
	for _, name := range slices.Sorted(maps.Keys(c.byCh)) {
		c.st.Channels = append(c.st.Channels, c.byCh[name])
	}
	return c.st
}
