package console

import (
	"fmt"
	"html/template"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/cool-ai/beachd/channels/webhook"

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
		"addr":         addr,
		"via":          decidedVia,
		"breakerWords": breakerWords,
		"breakerRetry": func(e webhook.EndpointStatus) string { return breakerRetry(e, now()) },
		"breakerClass": breakerClass,
		"kindClass": func(k string) string {
			switch k {
			case "approval request":
				return "warn"
			case "error":
				return "bad"
			}
			return "plain"
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
	case l == "injected", l == "decided", l == "returned":
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

// addr shows an address (or a URL) so that it wraps only at sensible
// points: before the @, after a dot, slash or plus (not a number's
// leading +), never inside a word.
// The text is escaped; only <wbr> is added (the one before the @ of class
// "at": in a wide table that is the only place an address wraps).
func addr(s string) template.HTML {
	var b strings.Builder
	for i, r := range s {
		if r == '@' {
			b.WriteString(`<wbr class="at">`)
		}
		b.WriteString(template.HTMLEscapeString(string(r)))
		if r == '.' || r == '/' || r == '+' && i > 0 || r == '?' || r == '&' {
			b.WriteString("<wbr>")
		}
	}
	return template.HTML(b.String())
}

// decidedVia says in plain words through which channel an approval was
// decided.
func decidedVia(channel string) string {
	switch channel {
	case "":
		return ""
	case "email":
		return "email reply"
	case "sms":
		return "SMS"
	case "whatsapp":
		return "WhatsApp"
	case "link":
		return "approval page"
	case "webhook":
		return "signed webhook"
	case "operator":
		return "operator (console or API)"
	case "policy":
		return "policy"
	}
	return channel
}

// secretParam: query parameters whose values are credentials whatever
// they look like.
var secretParam = regexp.MustCompile(`(?i)(token|secret|key|sig|signature|password|passwd|pwd|auth|code|credential|session|access)`)

// tokenLike: a value long and mixed enough to be a credential.
var tokenLike = regexp.MustCompile(`^[A-Za-z0-9_\-.~+/=%]{16,}$`)

// displayURL shows a configured URL without what may be a secret: no user
// information, no fragment, and the values of query parameters that name a
// credential or look like one replaced by "…". A URL that does not parse
// is not shown.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	u.User, u.Fragment, u.RawFragment = nil, "", ""
	if u.RawQuery != "" {
		q := u.Query()
		parts := make([]string, 0, len(q))
		for _, k := range sortedKeys(q) {
			for _, v := range q[k] {
				if secretParam.MatchString(k) || tokenLike.MatchString(v) && strings.ContainsAny(v, "0123456789") {
					v = "…"
				}
				parts = append(parts, url.QueryEscape(k)+"="+strings.ReplaceAll(url.QueryEscape(v), "%E2%80%A6", "…"))
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return u.String()
}

func sortedKeys(q url.Values) []string {
	ks := make([]string, 0, len(q))
	for k := range q {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// breakerWords says what an endpoint's breaker means for its deliveries.
func breakerWords(b webhook.BreakerState) string {
	switch b {
	case webhook.Closed:
		return "sending normally"
	case webhook.HalfOpen:
		return "trying again after repeated failures"
	}
	return "paused after repeated failures"
}

// breakerRetry says when a paused endpoint is tried again.
func breakerRetry(e webhook.EndpointStatus, now time.Time) string {
	if e.Breaker != webhook.Open || e.ProbeAt.IsZero() {
		return ""
	}
	return "retrying at " + e.ProbeAt.UTC().Format("15:04:05 UTC") + " (" + relative(now.Sub(e.ProbeAt)) + ")"
}

// breakerClass colours breakerWords.
func breakerClass(b webhook.BreakerState) string {
	switch b {
	case webhook.Closed:
		return "good"
	case webhook.HalfOpen:
		return "warn"
	}
	return "bad"
}
