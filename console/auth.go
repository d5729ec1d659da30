package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// cookieName is the session cookie.
const cookieName = "beachd_console"

// identity is who makes a request.
type identity struct {
	keyID    string // first 8 hex digits of the key's SHA-256
	readOnly bool
	// session is the cookie value; "" for a bearer key.
	session string
}

// keyID names a key without revealing it (the API's operator ids match).
func keyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

func (c *Console) mac(parts ...string) string {
	m := hmac.New(sha256.New, c.cfg.Secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// matchKey finds key among the configured keys, comparing every one in
// constant time.
func (c *Console) matchKey(key string) (Key, bool) {
	h := sha256.Sum256([]byte(key))
	var found Key
	ok := 0
	for _, k := range c.keys {
		if subtle.ConstantTimeCompare(h[:], k.hash[:]) == 1 {
			found, ok = k.Key, 1
		}
	}
	return found, ok == 1
}

// identify reads the bearer key or the session cookie.
func (c *Console) identify(r *http.Request) (identity, bool) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		k, ok := c.matchKey(strings.TrimSpace(tok))
		if !ok {
			return identity{}, false
		}
		return identity{keyID: keyID(k.Secret), readOnly: k.ReadOnly}, true
	}
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return identity{}, false
	}
	return c.readSession(ck.Value)
}

// newSession is "v1.<key id>.<r|w>.<expiry unix>.<random>.<mac>".
func (c *Console) newSession(k Key) (string, time.Time) {
	exp := c.cfg.Now().Add(c.cfg.SessionLifetime)
	role := "w"
	if k.ReadOnly {
		role = "r"
	}
	var nb [12]byte
	_, _ = io.ReadFull(c.cfg.Rand, nb[:])
	body := strings.Join([]string{"v1", keyID(k.Secret), role, strconv.FormatInt(exp.Unix(), 10), base64.RawURLEncoding.EncodeToString(nb[:])}, ".")
	return body + "." + c.mac("session", body), exp
}

func (c *Console) readSession(v string) (identity, bool) {
	if len(v) > 256 {
		return identity{}, false
	}
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return identity{}, false
	}
	body, sig := v[:i], v[i+1:]
	if !hmac.Equal([]byte(sig), []byte(c.mac("session", body))) {
		return identity{}, false
	}
	f := strings.Split(body, ".")
	if len(f) != 5 || f[0] != "v1" {
		return identity{}, false
	}
	exp, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || !c.cfg.Now().Before(time.Unix(exp, 0)) {
		return identity{}, false
	}
	// The key must still be configured, with the same role.
	for _, k := range c.keys {
		if keyID(k.Secret) == f[1] && k.ReadOnly == (f[2] == "r") {
			return identity{keyID: f[1], readOnly: k.ReadOnly, session: v}, true
		}
	}
	return identity{}, false
}

// csrfToken is the token every POST of id must carry.
func (c *Console) csrfToken(id identity) string {
	if id.session != "" {
		return c.mac("csrf", id.session)
	}
	return c.mac("csrf-bearer", id.keyID)
}

func (c *Console) validCSRF(id identity, got string) bool {
	return got != "" && hmac.Equal([]byte(got), []byte(c.csrfToken(id)))
}

// loginToken protects the sign-in form (login CSRF): issued with the form,
// valid for two hours.
func (c *Console) loginToken() string {
	ts := strconv.FormatInt(c.cfg.Now().Unix(), 10)
	return ts + "." + c.mac("login", ts)
}

func (c *Console) validLoginToken(t string) bool {
	ts, sig, ok := strings.Cut(t, ".")
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	age := c.cfg.Now().Sub(time.Unix(n, 0))
	return age > -time.Minute && age < 2*time.Hour && hmac.Equal([]byte(sig), []byte(c.mac("login", ts)))
}

// sameOrigin refuses a POST whose Origin names another host.
func (c *Console) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	if p, err := url.Parse(c.cfg.PublicURL); err == nil && p.Host != "" && strings.EqualFold(p.Host, u.Host) {
		return true
	}
	return false
}

func (c *Console) setSession(w http.ResponseWriter, value string, exp time.Time) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: value, Path: "/ui/", Expires: exp,
		MaxAge: int(exp.Sub(c.cfg.Now()).Seconds()), HttpOnly: true, Secure: c.secure(), SameSite: http.SameSiteStrictMode})
}

func (c *Console) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, Secure: c.secure(), SameSite: http.SameSiteStrictMode})
}

func (c *Console) secure() bool { return strings.HasPrefix(c.cfg.PublicURL, "https://") }

func sha(s string) [32]byte { return sha256.Sum256([]byte(s)) }
