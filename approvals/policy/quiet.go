package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// QuietHours is a daily window, in a zone, during which SMS and WhatsApp
// reminders and escalations wait for its end. From after To spans
// midnight ("21:00" to "08:00").
type QuietHours struct {
	Zone     *time.Location
	From, To int // minutes after midnight
}

// ParseQuietHours reads zone (an IANA name) and two "HH:MM" times.
func ParseQuietHours(zone, from, to string) (*QuietHours, []error) {
	q := &QuietHours{}
	var errs []error
	loc, err := time.LoadLocation(zone)
	switch {
	case strings.TrimSpace(zone) == "":
		errs = append(errs, fmt.Errorf("zone: required (an IANA zone such as Europe/London)"))
	case err != nil || zone == "Local":
		errs = append(errs, fmt.Errorf("zone: unknown time zone %q", zone))
	default:
		q.Zone = loc
	}
	var ok bool
	if q.From, ok = clock(from); !ok {
		errs = append(errs, fmt.Errorf("from: want a time of day such as 21:00, got %q", from))
	}
	if q.To, ok = clock(to); !ok {
		errs = append(errs, fmt.Errorf("to: want a time of day such as 08:00, got %q", to))
	}
	if len(errs) == 0 && q.From == q.To {
		errs = append(errs, fmt.Errorf("from and to are the same time: the window would be empty"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return q, nil
}

func clock(s string) (int, bool) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 {
		return 0, false
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, false
	}
	return hh*60 + mm, true
}

// Defer returns t, or, when t falls inside the window, the window's end.
func (q *QuietHours) Defer(t time.Time) time.Time {
	if q == nil {
		return t
	}
	lt := t.In(q.Zone)
	mins := lt.Hour()*60 + lt.Minute()
	inside := false
	if q.From < q.To {
		inside = mins >= q.From && mins < q.To
	} else {
		inside = mins >= q.From || mins < q.To
	}
	if !inside {
		return t
	}
	day := lt
	if mins >= q.To {
		day = lt.AddDate(0, 0, 1) // the window ends tomorrow
	}
	end := time.Date(day.Year(), day.Month(), day.Day(), q.To/60, q.To%60, 0, 0, q.Zone)
	if !end.After(t) {
		return t
	}
	return end
}
