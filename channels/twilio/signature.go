package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// Signature computes X-Twilio-Signature for a POST to fullURL with the
// given form parameters: base64(HMAC-SHA1(authToken, fullURL + each
// parameter name and value, sorted by name, no delimiters)). The values of a
// repeated name are signed once each, in sorted order: twilio-node
// (src/webhooks/webhooks.ts, toFormUrlEncodedParam) signs
// `Array.from(new Set(values)).sort()`, dropping a value repeated under the
// same name before it signs.
func Signature(authToken, fullURL string, params url.Values) string {
	return signature(authToken, fullURL, params, true)
}

// signature signs with duplicate values of a name dropped (dedup) or kept:
// twilio-python (twilio/request_validator.py, compute_signature) signs
// `sorted(values)` and keeps them.
func signature(authToken, fullURL string, params url.Values, dedup bool) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(fullURL))
	for _, k := range keys {
		vs := params[k]
		if len(vs) > 1 {
			vs = append([]string(nil), vs...)
			sort.Strings(vs)
			if dedup {
				vs = slices.Compact(vs)
			}
		}
		for _, v := range vs {
			mac.Write([]byte(k))
			mac.Write([]byte(v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// hasRepeatedValue reports whether some name carries the same value twice.
func hasRepeatedValue(params url.Values) bool {
	for _, vs := range params {
		if len(vs) < 2 {
			continue
		}
		seen := make(map[string]bool, len(vs))
		for _, v := range vs {
			if seen[v] {
				return true
			}
			seen[v] = true
		}
	}
	return false
}

// ValidSignature reports whether sig is Twilio's signature of a POST to
// fullURL with params. fullURL is the exact URL configured at Twilio. Like
// Twilio's own libraries, it also accepts the signature of the same URL
// with the scheme's default port written out (or left out), because
// Twilio's signing is not consistent about it. A form repeating a value
// under one name is accepted signed either way Twilio's libraries sign it
// (the repeat dropped, as twilio-node does, or kept, as twilio-python
// does). The comparison is constant time.
func ValidSignature(authToken, fullURL string, params url.Values, sig string) bool {
	if sig == "" || authToken == "" {
		return false
	}
	ok := false
	dedups := []bool{true}
	if hasRepeatedValue(params) {
		dedups = append(dedups, false)
	}
	for _, u := range urlVariants(fullURL) {
		for _, dedup := range dedups {
			want := signature(authToken, u, params, dedup)
			if subtle.ConstantTimeCompare([]byte(want), []byte(sig)) == 1 {
				ok = true
			}
		}
	}
	return ok
}

func urlVariants(raw string) []string {
	out := []string{raw}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return out
	}
	def := map[string]string{"https": "443", "http": "80"}[u.Scheme]
	if def == "" {
		return out
	}
	v := *u
	switch u.Port() {
	case "":
		v.Host = u.Host + ":" + def
	case def:
		v.Host = strings.TrimSuffix(u.Host, ":"+def)
	default:
		return out
	}
	return append(out, v.String())
}
