package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/store"
)

func urlEscape(s string) string { return url.QueryEscape(s) }

// funcs are the template helpers; times show in UTC, with a relative phrase.
func funcs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2 Jan 15:04:05 UTC")
		},
		"iso": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		},
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return relative(now().Sub(t))
		},
		"left": func(t time.Time) string {
			d := t.Sub(now())
			if d <= 0 {
				return "expired"
			}
			return approvals.TimeLeft(d)
		},
		"ms":         func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) },
		"stateClass": stateClass,
		"dispClass":  dispositionClass,
		"contains":   strings.Contains,
		// short is the start of a hash, enough to compare by eye.
		"short": func(h string) string {
			if len(h) > 12 {
				return h[:12] + "…"
			}
			return h
		},
		// voteClass colours a vote by its disposition.
		"voteClass": func(d string) string {
			if d == store.DispositionIgnored {
				return "bad"
			}
			return "good"
		},
		"summary": func(v *approvals.View) string { return v.Summary },
		"q": func(kv ...string) template.URL {
			v := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] != "" {
					v.Set(kv[i], kv[i+1])
				}
			}
			return template.URL(v.Encode())
		},
		"n": func(m map[store.State]int, st string) int { return m[store.State(st)] },
		// slice16 turns an RFC 3339 time into a datetime-local value.
		"slice16": func(s string) string {
			if len(s) >= 16 {
				return s[:16]
			}
			return s
		},
	}
}

func relative(d time.Duration) string {
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// stateClass maps a state word onto a badge style.
func stateClass(s string) string {
	switch strings.ToLower(s) {
	case "sent", "granted", "done", "ok", "closed", "succeeded", "delivered", "read", "enabled":
		return "good"
	case "dead", "denied", "failed", "open", "disabled", "undelivered", "expired":
		return "bad"
	case "retrying", "pending", "half-open", "sending", "running", "void", "queued", "held":
		return "warn"
	}
	switch l := strings.ToLower(s); {
	case strings.Contains(l, "dead"), strings.Contains(l, "failed"), strings.Contains(l, "wrong"), strings.Contains(l, "quarantined"):
		return "bad"
	case l == "injected", l == "decided":
		return "good"
	}
	return "plain"
}

// dispositionClass colours an inbound message's disposition: what reached
// an agent or an approval is good, what was refused is bad, what waits or
// went nowhere is a warning.
func dispositionClass(d string) string {
	switch d {
	case "approval", "turn":
		return "good"
	case "rejected":
		return "bad"
	case "held", "unrouted":
		return "warn"
	}
	return "plain"
}
