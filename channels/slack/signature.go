package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Slack's request signature (v0): X-Slack-Signature is "v0=" and the hex
// HMAC-SHA256, keyed with the app's signing secret, of
// "v0:<X-Slack-Request-Timestamp>:<body>".
const (
	HeaderSignature = "X-Slack-Signature"
	HeaderTimestamp = "X-Slack-Request-Timestamp"
	// MaxSkew is how far a request's timestamp may be from our clock.
	MaxSkew = 5 * time.Minute
)

// Why a request is refused (errors.Is).
var (
	ErrNoSignature    = errors.New("slack request: no X-Slack-Signature or X-Slack-Request-Timestamp")
	ErrBadTimestamp   = errors.New("slack request: X-Slack-Request-Timestamp is not a Unix time")
	ErrStale          = errors.New("slack request: timestamp more than five minutes from now")
	ErrBadSignature   = errors.New("slack request: signature does not match")
	errNoSecret       = errors.New("slack request: no signing secret configured")
	errSignatureShape = fmt.Errorf("%w (not v0=<64 hex digits>)", ErrBadSignature)
)

// Verify checks a request Slack signed: its timestamp within MaxSkew of
// now, and its signature, compared in constant time. It reads only the
// two headers and the raw body, and is what every Slack endpoint calls
// before anything else. slack-go's SecretsVerifier does the same against
// the wall clock; beachd's clock is injected, so the check is its own.
func Verify(h http.Header, body []byte, secret string, now time.Time) error {
	if secret == "" {
		return errNoSecret
	}
	sig, ts := h.Get(HeaderSignature), h.Get(HeaderTimestamp)
	if sig == "" || ts == "" {
		return ErrNoSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(ts) > 12 {
		return ErrBadTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%w (%s)", ErrStale, d.Round(time.Second))
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok || len(hexSig) != 2*sha256.Size {
		return errSignatureShape
	}
	// The hex as Slack writes it, lower case, compared as text in constant
	// time (as Bolt compares it).
	if !hmac.Equal([]byte(hexSig), []byte(hex.EncodeToString(Sign(secret, ts, body)))) {
		return ErrBadSignature
	}
	return nil
}

// Sign is the v0 HMAC of a request (tests and beachd dev sign with it).
func Sign(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return m.Sum(nil)
}

// SignatureHeader is the X-Slack-Signature value of a request.
func SignatureHeader(secret, ts string, body []byte) string {
	return "v0=" + hex.EncodeToString(Sign(secret, ts, body))
}
