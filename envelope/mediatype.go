package envelope

import (
	"mime"
	"strings"
)

// maxMediaType bounds a media type with its parameters (RFC 6838 allows
// 127 characters for each of type and subtype).
const maxMediaType = 255

// IsToken reports whether s is an RFC 2045 token: one or more US-ASCII
// characters other than controls, space and tspecials.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

// ValidMediaType reports whether mt is a bare RFC 2045 media type,
// "type/subtype" with both tokens (no parameters).
func ValidMediaType(mt string) bool {
	typ, sub, ok := strings.Cut(mt, "/")
	return ok && IsToken(typ) && IsToken(sub)
}

// checkMediaType says what is wrong with s as a media type with optional
// parameters ("text/plain; charset=utf-8"), or "" when nothing is. A media
// type ends up in a MIME header, so a control character (a CR or LF above
// all) is never accepted.
func checkMediaType(s string) string {
	switch {
	case len(s) > maxMediaType:
		return "longer than 255 characters"
	case strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f || r > 0x7e }):
		return "must be printable US-ASCII, without control characters or line breaks"
	}
	mt, _, err := mime.ParseMediaType(s)
	if err != nil || !ValidMediaType(mt) {
		return "must be a media type such as application/pdf (RFC 2045 type/subtype tokens, optional parameters)"
	}
	return ""
}
