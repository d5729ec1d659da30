package conversations

import (
	"errors"
	"strings"

	"github.com/cool-ai/beachd/envelope"
)

// normalise is an address as routing compares it: a lower-case email
// address without brackets or "mailto:", or an E.164 number without
// "whatsapp:"/"sms:" and without spaces, dashes, dots or parentheses.
func normalise(channel, a string) string {
	return clip(normaliseUnbounded(channel, clip(a, 4*maxAddress)), maxAddress)
}

func normaliseUnbounded(channel, a string) string {
	a = strings.TrimSpace(a)
	spec, _ := envelope.Channel(channel)
	switch spec.Address {
	case envelope.AddressEmail:
		a = strings.ToLower(strings.Trim(a, "<>"))
		return strings.TrimPrefix(a, "mailto:")
	case envelope.AddressNumber:
		lower := strings.ToLower(a)
		for _, p := range []string{"whatsapp:", "sms:", "tel:"} {
			if strings.HasPrefix(lower, p) {
				a = a[len(p):]
				break
			}
		}
		return strings.Map(func(r rune) rune {
			switch r {
			case ' ', '-', '.', '(', ')', '\t':
				return -1
			}
			return r
		}, a)
	case envelope.AddressSlack:
		// Slack ids are upper case, and case matters; an email address
		// is folded as for mail.
		if strings.Contains(a, "@") {
			return strings.ToLower(a)
		}
		return a
	}
	return strings.ToLower(a)
}

// checkPattern reports whether p is an allow pattern: "*", "*@domain",
// "a@b", "+digits" or "+digits*".
func checkPattern(p string) error {
	switch {
	case p == "*":
		return nil
	case envelope.SlackUser(p):
		return nil
	case strings.HasPrefix(p, "*@"):
		if len(p) < 4 || strings.ContainsAny(p[2:], "@* ") {
			return errors.New(`want "*@domain"`)
		}
		return nil
	case strings.Contains(p, "@"):
		if strings.ContainsAny(p, "* ") || strings.Count(p, "@") != 1 || strings.HasPrefix(p, "@") || strings.HasSuffix(p, "@") {
			return errors.New(`want an address "name@domain"`)
		}
		return nil
	case strings.HasPrefix(p, "+"):
		digits := strings.TrimSuffix(p[1:], "*")
		if digits == "" || strings.Trim(digits, "0123456789") != "" {
			return errors.New(`want an E.164 number "+4477…" or a prefix "+44*"`)
		}
		return nil
	}
	return errors.New(`want "*", "*@domain", "name@domain", "+number", "+prefix*" or a Slack user "U…"`)
}

// allowed reports whether the (normalised) sender matches one of the
// patterns: deny by default.
func allowed(channel, from string, patterns []string) bool {
	if from == "" {
		return false
	}
	spec, _ := envelope.Channel(channel)
	email, number := spec.Address == envelope.AddressEmail, spec.Address == envelope.AddressNumber
	slackUser := spec.Address == envelope.AddressSlack
	for _, p := range patterns {
		switch {
		case p == "*":
			return true
		case slackUser && envelope.SlackUser(p):
			if from == p {
				return true
			}
		case email && strings.HasPrefix(p, "*@"):
			if strings.HasSuffix(from, strings.ToLower(p[1:])) && strings.Count(from, "@") == 1 {
				return true
			}
		case email && strings.Contains(p, "@"):
			if from == strings.ToLower(p) {
				return true
			}
		case number && strings.HasPrefix(p, "+"):
			if pre, ok := strings.CutSuffix(p, "*"); ok {
				if strings.HasPrefix(from, pre) {
					return true
				}
			} else if from == p {
				return true
			}
		}
	}
	return false
}

// ourDeliveryID is the delivery id in one of our Message-IDs,
// <dlv_…[.token]@domain>; ok is false for any other id.
func ourDeliveryID(msgID string) (string, bool) {
	id := strings.TrimSpace(msgID)
	id = strings.TrimPrefix(id, "<")
	id = strings.TrimSuffix(id, ">")
	local, _, ok := strings.Cut(id, "@")
	if !ok || !strings.HasPrefix(local, "dlv_") {
		return "", false
	}
	local, _, _ = strings.Cut(local, ".")
	if len(local) < 5 || len(local) > 64 {
		return "", false
	}
	for _, c := range local[4:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z') {
			return "", false
		}
	}
	return local, true
}

// bareID is a Message-ID without brackets or spaces, bounded.
func bareID(id string) string {
	id = strings.Trim(strings.TrimSpace(id), "<>")
	if len(id) > 998 {
		id = ""
	}
	return id
}

// clip cuts s to at most n bytes without splitting a character.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// replySubject is "Re: subject" unless it already starts with a reply
// prefix.
func replySubject(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if l := strings.ToLower(s); strings.HasPrefix(l, "re:") || strings.HasPrefix(l, "aw:") || strings.HasPrefix(l, "sv:") {
		return s
	}
	return "Re: " + s
}
