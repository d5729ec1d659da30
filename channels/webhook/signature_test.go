package webhook

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The Standard Webhooks test vector, from
// standard-webhooks/standard-webhooks libraries/go/webhook_test.go
// (TestWebhookSign).
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustSigner(t testing.TB, secrets ...string) *Signer {
	t.Helper()
	s, err := ParseSigner(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignSpecVector(t *testing.T) {
	s := mustSigner(t, vectorSecret)
	got := s.Sign(vectorID, time.Unix(vectorTS, 0), []byte(vectorBody))
	if got != vectorSig {
		t.Fatalf("Sign = %q, want the spec's %q", got, vectorSig)
	}
	h := http.Header{}
	s.SetHeaders(h, vectorID, time.Unix(vectorTS, 0), []byte(vectorBody))
	if h.Get(HeaderID) != vectorID || h.Get(HeaderTimestamp) != "1614265330" || h.Get(HeaderSignature) != vectorSig {
		t.Fatalf("headers = %v", h)
	}
	secs, _ := ParseSecrets([]string{vectorSecret})
	if err := Verify(secs, h, []byte(vectorBody), time.Unix(vectorTS+10, 0), 0); err != nil {
		t.Fatalf("Verify of the spec vector: %v", err)
	}
}

// Another secret, generated for these tests (32 bytes).
var otherSecret = func() string {
	s, _ := NewSecret(bytes.Repeat([]byte{0x42}, 32))
	return s.Encode()
}()

func TestSignRotation(t *testing.T) {
	old, cur := vectorSecret, otherSecret
	both := mustSigner(t, cur, old)
	ts := time.Unix(vectorTS, 0)
	sig := both.Sign(vectorID, ts, []byte(vectorBody))
	parts := strings.Split(sig, " ")
	if len(parts) != 2 {
		t.Fatalf("rotation signature %q: want two space-separated signatures", sig)
	}
	if parts[1] != vectorSig {
		t.Fatalf("second signature %q, want the old secret's %q", parts[1], vectorSig)
	}
	if parts[0] != mustSigner(t, cur).Sign(vectorID, ts, []byte(vectorBody)) {
		t.Fatalf("first signature is not the current secret's")
	}
	// A receiver knowing only either secret accepts it.
	h := http.Header{}
	both.SetHeaders(h, vectorID, ts, []byte(vectorBody))
	for _, only := range []string{old, cur} {
		if err := mustSigner(t, only).Verify(h, []byte(vectorBody), ts, 0); err != nil {
			t.Errorf("receiver with one secret: %v", err)
		}
	}
	// A receiver knowing another secret refuses it.
	third, _ := NewSecret(bytes.Repeat([]byte{7}, 24))
	if err := Verify([]Secret{third}, h, []byte(vectorBody), ts, 0); !errors.Is(err, ErrNoMatch) {
		t.Errorf("unrelated secret: err = %v, want ErrNoMatch", err)
	}
}

func TestVerifyRejects(t *testing.T) {
	s := mustSigner(t, vectorSecret)
	secs := s.Secrets()
	body := []byte(vectorBody)
	now := time.Unix(vectorTS, 0)
	signed := func(ts time.Time) http.Header {
		h := http.Header{}
		s.SetHeaders(h, vectorID, ts, body)
		return h
	}
	tests := []struct {
		name   string
		header func() http.Header
		body   []byte
		want   error
	}{
		{"valid", func() http.Header { return signed(now) }, body, nil},
		{"valid at the edge of the past tolerance", func() http.Header { return signed(now.Add(-5 * time.Minute)) }, body, nil},
		{"valid at the edge of the future tolerance", func() http.Header { return signed(now.Add(5 * time.Minute)) }, body, nil},
		{"too old", func() http.Header { return signed(now.Add(-5*time.Minute - time.Second)) }, body, ErrTooOld},
		{"too new", func() http.Header { return signed(now.Add(5*time.Minute + time.Second)) }, body, ErrTooNew},
		{"body changed", func() http.Header { return signed(now) }, []byte(`{"test": 2432232315}`), ErrNoMatch},
		{"missing id", func() http.Header { h := signed(now); h.Del(HeaderID); return h }, body, ErrMissingHeaders},
		{"missing timestamp", func() http.Header { h := signed(now); h.Del(HeaderTimestamp); return h }, body, ErrMissingHeaders},
		{"missing signature", func() http.Header { h := signed(now); h.Del(HeaderSignature); return h }, body, ErrMissingHeaders},
		{"id changed", func() http.Header { h := signed(now); h.Set(HeaderID, "msg_other"); return h }, body, ErrNoMatch},
		{"timestamp changed", func() http.Header {
			h := signed(now)
			h.Set(HeaderTimestamp, strconv.Itoa(vectorTS+1))
			return h
		}, body, ErrNoMatch},
		{"timestamp not digits", func() http.Header { h := signed(now); h.Set(HeaderTimestamp, "+1614265330"); return h }, body, ErrBadTimestamp},
		{"wrong signature", func() http.Header {
			h := signed(now)
			h.Set(HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
			return h
		}, body, ErrNoMatch},
		{"right signature under another version", func() http.Header {
			h := signed(now)
			h.Set(HeaderSignature, "v2,"+strings.TrimPrefix(vectorSig, "v1,"))
			return h
		}, body, ErrNoMatch},
		{"garbage signature", func() http.Header { h := signed(now); h.Set(HeaderSignature, "v1,!!!"); return h }, body, ErrNoMatch},
		{"valid among several", func() http.Header {
			h := signed(now)
			h.Set(HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1a,abc "+vectorSig+" v2,x")
			return h
		}, body, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(secs, tt.header(), tt.body, now, 5*time.Minute)
			if tt.want == nil && err != nil {
				t.Fatalf("Verify = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
	if err := Verify(nil, signed(now), body, now, 0); !errors.Is(err, ErrNoSecrets) {
		t.Errorf("no secrets: %v", err)
	}
}

func TestParseSecret(t *testing.T) {
	for _, bad := range []string{
		"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_not base64!",
		"whsec_" + "AAAA", // 3 bytes: too short
		"whsk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	} {
		if _, err := ParseSecret(bad); !errors.Is(err, ErrSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrSecret", bad, err)
		}
	}
	s, err := ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if s.Encode() != vectorSecret {
		t.Errorf("Encode = %q", s.Encode())
	}
	if strings.Contains(s.String(), "MfKQ") {
		t.Errorf("String leaks the key: %q", s.String())
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(vectorID, "1614265330", vectorSig, []byte(vectorBody))
	f.Add("", "", "", []byte(nil))
	f.Add("a.b", "00001614265330", "v1,"+strings.Repeat("A", 44)+" v1,x", []byte("{}"))
	f.Add("msg", "1614265330", "v1a,abc v1, v1,=", []byte("x"))
	secs := mustSigner(f, vectorSecret).Secrets()
	now := time.Unix(vectorTS, 0)
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sig)
		err := Verify(secs, h, body, now, 0)
		if err != nil {
			return
		}
		// Whatever passed must carry the true signature of what was sent.
		want := mustSigner(t, vectorSecret)
		n, perr := parseUnix(ts)
		if perr != nil {
			t.Fatalf("accepted timestamp %q that does not parse", ts)
		}
		if !strings.Contains(" "+sig+" ", " "+want.Sign(id, time.Unix(n, 0), body)+" ") &&
			!strings.Contains(sig, strings.TrimPrefix(want.Sign(id, time.Unix(n, 0), body), "v1,")) {
			t.Fatalf("accepted a signature header %q that lacks the true signature", sig)
		}
	})
}
