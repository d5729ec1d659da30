package approvals

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"github.com/cool-ai/beachd/envelope"
	"strings"
	"unicode"
)

// Token kinds, as stored in store.TokenBinding.Kind.
const (
	KindToken  = "token"  // email (and webhook) reply token, 26 chars [a-z2-7]
	KindLink   = "link"   // confirmation page token, same format
	KindCode   = "code"   // short numeric SMS/WhatsApp code, bound to the number
	KindButton = "button" // WhatsApp quick-reply or Slack button payload approvalId:nonce
)

// TokenLen is the length of email and link tokens: 128 bits in RFC 4648
// base32, lower-case, unpadded.
const TokenLen = 26

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// minter derives every token of a (approval, channel, recipient) from the
// server key and the recipient's random nonce: HMAC-SHA256 over the length-
// prefixed fields. Nothing but the nonce is stored, so tokens can be
// recomputed when a message is rendered, and a stolen database does not
// yield a single usable token (the key is not in it).
type minter struct{ key []byte }

func (m minter) mac(fields ...string) []byte {
	h := hmac.New(sha256.New, m.key)
	var n [4]byte
	for _, f := range fields {
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

func (m minter) token(kind, approvalID, channel, recipient, nonce string) string {
	return strings.ToLower(b32.EncodeToString(m.mac(kind, approvalID, channel, recipient, nonce)[:16]))
}

func (m minter) code(approvalID, channel, recipient, nonce string, digits int) string {
	sum := m.mac(KindCode, approvalID, channel, recipient, nonce)
	mod := uint64(1)
	for range digits {
		mod *= 10
	}
	v := binary.BigEndian.Uint64(sum[:8]) % mod
	return fmt.Sprintf("%0*d", digits, v)
}

// buttonNonce is the nonce of one decision button (one per decision, so the
// payload itself says what was pressed). WhatsApp's buttons were the first,
// and their MAC is unchanged.
func (m minter) buttonNonce(approvalID, channel, recipient, nonce, decision string) string {
	return strings.ToLower(b32.EncodeToString(m.mac(KindButton, approvalID, channel, recipient, nonce, decision)[:16]))
}

// pageNonce binds a confirmation page's form to its token and the time the
// page was shown.
func (m minter) pageNonce(token string, issued int64) string {
	return fmt.Sprintf("%d.%s", issued, strings.ToLower(b32.EncodeToString(m.mac("page", token, fmt.Sprint(issued))[:15])))
}

func hashKey(fields ...string) string {
	h := sha256.New()
	for i, f := range fields {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Storage keys (hex SHA-256) of each token kind. The plaintext is never
// stored.
func tokenKey(tok string) string                  { return hashKey(KindToken, tok) }
func linkKey(tok string) string                   { return hashKey(KindLink, tok) }
func codeKey(channel, number, code string) string { return hashKey(KindCode, channel, number, code) }
func buttonKey(payload string) string             { return hashKey(KindButton, payload) }
func equalConstantTime(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
func isBase32Lower(r rune) bool { return (r >= 'a' && r <= 'z') || (r >= '2' && r <= '7') }
func isDigits(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// foldAddress is the comparison form of an address on channel (its spec's
// Fold); an address on a name that is not a channel (the link page) is
// kept as is.
func foldAddress(channel, addr string) string {
	if spec, ok := envelope.Channel(channel); ok {
		return spec.Fold(addr)
	}
	return addr
}
func sameAddress(channel, a, b string) bool {
	return equalConstantTime(foldAddress(channel, a), foldAddress(channel, b))
}

// ParseToken checks an email or link token: 26 characters of [a-z2-7]
// (upper case is accepted and folded). ok is false for anything else.
func ParseToken(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) != TokenLen {
		return "", false
	}
	for _, r := range s {
		if !isBase32Lower(r) {
			return "", false
		}
	}
	return s, true
}

// ParseButtonPayload splits a WhatsApp quick-reply payload approvalId:nonce.
// The approval id may itself hold colons; the nonce is after the last one.
func ParseButtonPayload(s string) (approvalID, nonce string, ok bool) {
	if len(s) > 600 {
		return "", "", false
	}
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", false
	}
	approvalID, nonce = s[:i], s[i+1:]
	for _, r := range nonce {
		if !isBase32Lower(r) {
			return "", "", false
		}
	}
	return approvalID, nonce, true
}

// FindCode finds a code of exactly `digits` digits as a whole word in the
// first non-empty line of text ("YES 482113", "482113 no", "no, 482113:
// too dear"), and returns it with the line's reason text with the code
// removed. ok is false when there is none, or more than one.
func FindCode(text string, digits int) (code string, ok bool) {
	line := firstLine(text)
	for _, f := range strings.FieldsFunc(line, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(f) == digits && isDigits(f) {
			if code != "" && code != f {
				return "", false
			}
			code = f
		}
	}
	return code, code != ""
}

// stripCode removes the first whole-word occurrence of code from reason.
func stripCode(reason, code string) string {
	if code == "" {
		return reason
	}
	words := strings.Fields(reason)
	for i, w := range words {
		if strings.Trim(w, ".,;:!-") == code {
			words = append(words[:i], words[i+1:]...)
			break
		}
	}
	return cleanReason(strings.Join(words, " "))
}
