package console

import (
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
)

func newAuthConsole(t testing.TB, clock *fakeclock.Clock) *Console {
	c := &Console{cfg: Config{Secret: []byte("0123456789abcdef0123"), SessionLifetime: time.Hour, Now: clock.Now,
		Rand: zeros{}}}
	for _, k := range []Key{{Secret: fullKey}, {Secret: readKey, ReadOnly: true}} {
		c.keys = append(c.keys, hashedKey{Key: k, hash: sha(k.Secret)})
	}
	return c
}

func TestSessionsExpireAndEndWithTheirKey(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC))
	c := newAuthConsole(t, clock)
	v, _ := c.newSession(Key{Secret: readKey, ReadOnly: true})
	id, ok := c.readSession(v)
	if !ok || !id.readOnly || id.keyID != keyID(readKey) {
		t.Fatalf("fresh session: %+v %v", id, ok)
	}
	if !c.validCSRF(id, c.csrfToken(id)) || c.validCSRF(id, "") || c.validCSRF(identity{keyID: id.keyID}, c.csrfToken(id)) {
		t.Error("CSRF tokens are not bound to their session")
	}
	clock.Advance(61 * time.Minute)
	if _, ok := c.readSession(v); ok {
		t.Error("an expired session was accepted")
	}
	clock.Advance(-61 * time.Minute)
	c.keys = c.keys[:1] // the read key is removed from the configuration
	if _, ok := c.readSession(v); ok {
		t.Error("a session outlived its key")
	}
	tok := c.loginToken()
	if !c.validLoginToken(tok) || c.validLoginToken(tok+"x") {
		t.Error("login token")
	}
	clock.Advance(3 * time.Hour)
	if c.validLoginToken(tok) {
		t.Error("an old login token was accepted")
	}
}

func FuzzReadSession(f *testing.F) {
	clock := fakeclock.New(time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC))
	c := newAuthConsole(f, clock)
	v, _ := c.newSession(Key{Secret: fullKey})
	f.Add(v)
	f.Add(strings.Replace(v, ".w.", ".r.", 1))
	f.Add("v1.x.w.1.a.b")
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := c.readSession(s)
		if ok && s != v {
			t.Fatalf("forged session accepted: %q → %+v", s, id)
		}
		_ = c.validLoginToken(s)
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
