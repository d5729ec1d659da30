package email

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"net/mail"
	"strings"
)

// A conversation's reply address is LOCAL+c-CNV.MAC@DOMAIN: the address the
// answer went out from (or the configured reply address) with a tag that
// names the conversation and proves beachd wrote it. MAC is the first
// convMACBytes of HMAC-SHA256(key, convMACLabel+CNV), lower-case base32
// without padding. Mail to such an address continues that conversation
// whatever its subject and threading headers say; a bad MAC names none.
const (
	convTagPrefix = "c-"
	convMACLabel  = "beachd conversation reply\x00"
	convMACBytes  = 10
	// maxConvID bounds a conversation id in an address (an RFC 5321 local
	// part is at most 64 octets; the id, the tag and the MAC share it with
	// the base local part, which is checked by length below).
	maxConvID = 40
	// maxLocalPart is RFC 5321's limit on a local part.
	maxLocalPart = 64
)

var convMACEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// convMACLen is the length of the encoded MAC (16 characters).
var convMACLen = convMACEncoding.EncodedLen(convMACBytes)

// ReplyAddress returns the signed reply address of conversation cnv built
// on base ("local@domain", or "Name <local@domain>" whose name is dropped):
// local+c-CNV.MAC@domain. base's local part must not carry a "+" tag
// already, and the whole local part must stay within 64 octets.
func ReplyAddress(key []byte, base, cnv string) (string, error) {
	if len(key) == 0 {
		return "", errors.New("conversation reply address: no key")
	}
	if !validConvID(cnv) {
		return "", fmt.Errorf("conversation reply address: %q is not a conversation id (lower-case letters, digits, '_' and '-', at most %d)", cnv, maxConvID)
	}
	a, err := mail.ParseAddress(strings.TrimSpace(base))
	if err != nil {
		return "", fmt.Errorf("conversation reply address: base %q: %w", base, err)
	}
	at := strings.LastIndexByte(a.Address, '@')
	if at <= 0 || at == len(a.Address)-1 {
		return "", fmt.Errorf("conversation reply address: base %q has no local part or domain", base)
	}
	local, domain := strings.ToLower(a.Address[:at]), strings.ToLower(a.Address[at+1:])
	if strings.ContainsAny(local, "+\"\\ ") {
		return "", fmt.Errorf("conversation reply address: base %q: the local part must be plain, without a '+' tag", base)
	}
	local += "+" + convTagPrefix + cnv + "." + convMAC(key, cnv)
	if len(local) > maxLocalPart {
		return "", fmt.Errorf("conversation reply address: local part of %d octets is over %d", len(local), maxLocalPart)
	}
	return local + "@" + domain, nil
}

// ConversationFromAddress returns the conversation a signed reply address
// names: ok is false for anything but LOCAL+c-CNV.MAC@DOMAIN whose MAC is
// right for key (compared in constant time), and without a key. addr may
// be bare or in angle brackets; case does not matter (the MAC is lower
// case and conversation ids are too, so an address lower-cased on the way
// still verifies).
func ConversationFromAddress(key []byte, addr string) (cnv string, ok bool) {
	if len(key) == 0 || len(addr) > 320 {
		return "", false
	}
	addr = strings.ToLower(strings.TrimSpace(addr))
	addr = strings.TrimSuffix(strings.TrimPrefix(addr, "<"), ">")
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 || at > 2*maxLocalPart {
		return "", false
	}
	local := addr[:at]
	base, tag, found := strings.Cut(local, "+")
	if !found || base == "" || !strings.HasPrefix(tag, convTagPrefix) {
		return "", false
	}
	tag = tag[len(convTagPrefix):]
	dot := strings.LastIndexByte(tag, '.')
	if dot < 0 {
		return "", false
	}
	cnv, mac := tag[:dot], tag[dot+1:]
	if !validConvID(cnv) || len(mac) != convMACLen {
		return "", false
	}
	if !hmac.Equal([]byte(mac), []byte(convMAC(key, cnv))) {
		return "", false
	}
	return cnv, true
}

// convMAC is the MAC of cnv, lower-case base32.
func convMAC(key []byte, cnv string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(convMACLabel))
	h.Write([]byte(cnv))
	return strings.ToLower(convMACEncoding.EncodeToString(h.Sum(nil)[:convMACBytes]))
}

// validConvID: a conversation id as beachd makes them ("cnv_" and lower-case
// base32), or any short run of lower-case letters, digits, '_' and '-'.
// No '.', '+' or '@': the address stays unambiguous.
func validConvID(s string) bool {
	if s == "" || len(s) > maxConvID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
