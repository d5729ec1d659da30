package store

import (
	"testing"
	"time"
)

// Match applies every field of the filter, the recipient ignoring case and
// the time bounds half-open, and leaves paging (Before) to the backend.
func TestDeliveryFilterMatch(t *testing.T) {
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	d := &Delivery{ID: "dlv_2", State: StateDead, Channel: "sms", Agent: "travel", To: "+4479000111", CreatedAt: at}
	for _, c := range []struct {
		name string
		f    DeliveryFilter
		want bool
	}{
		{"zero", DeliveryFilter{}, true},
		{"all fields", DeliveryFilter{State: StateDead, Channel: "sms", Agent: "travel", To: "9000", Since: at, Until: at.Add(time.Second)}, true},
		{"state", DeliveryFilter{State: StateSent}, false},
		{"channel", DeliveryFilter{Channel: "email"}, false},
		{"agent", DeliveryFilter{Agent: "ops"}, false},
		{"recipient", DeliveryFilter{To: "555"}, false},
		{"since", DeliveryFilter{Since: at.Add(time.Nanosecond)}, false},
		{"until is exclusive", DeliveryFilter{Until: at}, false},
		{"before is paging", DeliveryFilter{Before: "dlv_1"}, true},
	} {
		if got := c.f.Match(d); got != c.want {
			t.Errorf("%s: Match = %v, want %v", c.name, got, c.want)
		}
	}
	mail := &Delivery{To: "Ann@Example.org"}
	if !(DeliveryFilter{To: "ann@example"}).Match(mail) {
		t.Error("the recipient is matched with its case")
	}
}
