package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// The header names as net/http keys them (header names are
// case-insensitive on the wire).
const (
	canonicalID        = "Webhook-Id"
	canonicalTimestamp = "Webhook-Timestamp"
	canonicalSignature = "Webhook-Signature"
)

// SecretPrefix marks a symmetric Standard Webhooks secret.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a webhook-timestamp may be from now, either
// way, before Verify refuses it (replay protection).
const DefaultTolerance = 5 * time.Minute

// Secret sizes the spec allows: at least 24 bytes, at most 64.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// maxSignatures bounds how many signatures of a header Verify looks at.
const maxSignatures = 16

// Errors of signing and verification.
var (
	// ErrSecret: a secret is not "whsec_" followed by base64 of 24-64 bytes.
	ErrSecret = errors.New("invalid webhook secret")
	// ErrNoSecrets: a signer or verifier was given no secret.
	ErrNoSecrets = errors.New("no webhook secret")
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature is absent.
	ErrMissingHeaders = errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	// ErrBadTimestamp: webhook-timestamp is not unix seconds.
	ErrBadTimestamp = errors.New("webhook-timestamp is not a unix timestamp")
	// ErrTooOld / ErrTooNew: webhook-timestamp is outside the tolerance.
	ErrTooOld = errors.New("webhook-timestamp too old")
	ErrTooNew = errors.New("webhook-timestamp too far in the future")
	// ErrNoMatch: no v1 signature matched any secret.
	ErrNoMatch = errors.New("no matching webhook signature")
)

// Secret is one decoded signing key. Its String and LogValue never show the
// key.
type Secret struct{ key []byte }

// ParseSecret decodes "whsec_<base64>". The prefix is required so that a
// secret of another scheme is not used by mistake.
func ParseSecret(s string) (Secret, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("%w: must start with %q", ErrSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: not base64 after %q", ErrSecret, SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("%w: %d bytes; the spec asks for %d to %d", ErrSecret, len(key), MinSecretBytes, MaxSecretBytes)
	}
	return Secret{key: key}, nil
}

// ParseSecrets decodes each of ss; the first error names the index.
func ParseSecrets(ss []string) ([]Secret, error) {
	out := make([]Secret, 0, len(ss))
	for i, s := range ss {
		sec, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i, err)
		}
		out = append(out, sec)
	}
	return out, nil
}

// NewSecret wraps raw key bytes (for generated secrets and tests).
func NewSecret(key []byte) (Secret, error) {
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("%w: %d bytes; the spec asks for %d to %d", ErrSecret, len(key), MinSecretBytes, MaxSecretBytes)
	}
	return Secret{key: append([]byte(nil), key...)}, nil
}

// Encode returns the secret as "whsec_<base64>", for showing it to the
// operator who configures the receiver. Never log it.
func (s Secret) Encode() string { return SecretPrefix + base64.StdEncoding.EncodeToString(s.key) }

func (s Secret) String() string { return SecretPrefix + "[redacted]" }

// LogValue keeps the key out of structured logs.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Signer signs webhooks with one or more secrets (several while a secret is
// being rotated). It is safe for concurrent use.
type Signer struct {
	secrets []Secret
	pools   []*sync.Pool // one pool of HMAC states per secret
}

// NewSigner returns a signer for the given secrets, in the order their
// signatures are written.
func NewSigner(secrets ...Secret) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecrets
	}
	s := &Signer{secrets: append([]Secret(nil), secrets...)}
	for _, sec := range s.secrets {
		if len(sec.key) == 0 {
			return nil, fmt.Errorf("%w: empty key", ErrSecret)
		}
		key := sec.key
		s.pools = append(s.pools, &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }})
	}
	return s, nil
}

// ParseSigner parses "whsec_…" strings and returns their signer.
func ParseSigner(secrets ...string) (*Signer, error) {
	ss, err := ParseSecrets(secrets)
	if err != nil {
		return nil, err
	}
	return NewSigner(ss...)
}

// Secrets returns the signer's secrets (to verify with the same set).
func (s *Signer) Secrets() []Secret { return append([]Secret(nil), s.secrets...) }

// Sign returns the webhook-signature value for a message: "v1,<base64>"
// for each secret, space-separated.
func (s *Signer) Sign(id string, ts time.Time, body []byte) string {
	var b strings.Builder
	b.Grow(len(s.pools) * 48)
	var sum [sha256.Size]byte
	var enc [44]byte // base64 of 32 bytes
	for i, p := range s.pools {
		h := p.Get().(hash.Hash)
		mac(h, id, ts.Unix(), body, sum[:0])
		p.Put(h)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		base64.StdEncoding.Encode(enc[:], sum[:])
		b.Write(enc[:])
	}
	return b.String()
}

// SetHeaders sets webhook-id, webhook-timestamp and webhook-signature on h.
// id must not contain '.', which would make "id.timestamp.body" ambiguous.
func (s *Signer) SetHeaders(h http.Header, id string, ts time.Time, body []byte) {
	h[canonicalID] = []string{id}
	h[canonicalTimestamp] = []string{strconv.FormatInt(ts.Unix(), 10)}
	h[canonicalSignature] = []string{s.Sign(id, ts, body)}
}

// Verify checks the Standard Webhooks headers of a request against the
// signer's secrets (see the package function Verify).
func (s *Signer) Verify(h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	return Verify(s.secrets, h, body, now, tolerance)
}

// mac computes HMAC(id.ts.body) into out[:0] with a reset h.
func mac(h hash.Hash, id string, ts int64, body []byte, out []byte) []byte {
	h.Reset()
	var tsb [20]byte
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(tsb[:0], ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(out)
}

// Verify checks a request's webhook-id, webhook-timestamp and
// webhook-signature against secrets: the timestamp must be within tolerance
// of now, either way (tolerance ≤ 0 means DefaultTolerance), and at least one
// "v1," signature of the (space-separated) list must equal the HMAC under
// one of the secrets. Comparison is constant-time. Signatures of other
// versions (v1a, …) are skipped. It returns nil or one of the package's
// errors.
func Verify(secrets []Secret, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secrets) == 0 {
		return ErrNoSecrets
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	id, tsStr, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsStr == "" || sigs == "" {
		return ErrMissingHeaders
	}
	ts, err := parseUnix(tsStr)
	if err != nil {
		return err
	}
	nowUnix := now.Unix()
	tolSec := int64(tolerance / time.Second)
	switch {
	case ts < nowUnix-tolSec:
		return ErrTooOld
	case ts > nowUnix+tolSec:
		return ErrTooNew
	}
	// Decode the offered v1 signatures once.
	var offered [][]byte
	for i, f := range strings.Fields(sigs) {
		if i >= maxSignatures {
			break
		}
		v, sig, ok := strings.Cut(f, ",")
		if !ok || v != "v1" {
			continue
		}
		// Strict: a signature differing only in base64's unused padding bits is
		// not the signature (the reference implementations compare the text).
		raw, err := base64.StdEncoding.Strict().DecodeString(sig)
		if err != nil || len(raw) != sha256.Size {
			continue
		}
		offered = append(offered, raw)
	}
	if len(offered) == 0 {
		return ErrNoMatch
	}
	var sum [sha256.Size]byte
	match := 0
	for _, sec := range secrets {
		want := mac(hmac.New(sha256.New, sec.key), id, ts, body, sum[:0])
		for _, got := range offered {
			// Constant-time per comparison; every pair is compared so that
			// timing does not tell which secret or position matched.
			match |= boolInt(hmac.Equal(want, got))
		}
	}
	if match == 0 {
		return ErrNoMatch
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseUnix accepts only decimal digits (no sign, no spaces), up to 12 of
// them (year 33658), so that odd encodings of a timestamp are refused.
func parseUnix(s string) (int64, error) {
	if len(s) == 0 || len(s) > 12 {
		return 0, ErrBadTimestamp
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, ErrBadTimestamp
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}
