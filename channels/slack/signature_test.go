package slack

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

type boltVectors struct {
	Verifier string `json:"verifier"`
	Vectors  []struct {
		Name      string `json:"name"`
		Secret    string `json:"secret"`
		Timestamp string `json:"timestamp"`
		Body      string `json:"body"`
		Signature string `json:"signature"`
		Now       int64  `json:"now"`
		Valid     bool   `json:"valid"`
		BoltError string `json:"boltError"`
	} `json:"vectors"`
}

func loadVectors(t *testing.T, raw []byte) boltVectors {
	t.Helper()
	var v boltVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) < 10 {
		t.Fatalf("%d vectors", len(v.Vectors))
	}
	return v
}

// Every vector's verdict is Slack's own Bolt for JavaScript verifier's
// (testdata/slack-bolt/vectors.mjs): beachd accepts what Bolt accepts and
// refuses what it refuses.
func TestVerifyAgreesWithBolt(t *testing.T) {
	raw, err := os.ReadFile("testdata/bolt-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	v := loadVectors(t, raw)
	valid := 0
	for _, c := range v.Vectors {
		h := http.Header{}
		h.Set(HeaderSignature, c.Signature)
		h.Set(HeaderTimestamp, c.Timestamp)
		err := Verify(h, []byte(c.Body), c.Secret, time.Unix(c.Now, 0))
		if (err == nil) != c.Valid {
			t.Errorf("%s: beachd says %v, %s says valid=%v (%s)", c.Name, err, v.Verifier, c.Valid, c.BoltError)
		}
		if c.Valid {
			valid++
		}
	}
	if valid == 0 || valid == len(v.Vectors) {
		t.Fatalf("%d of %d vectors valid: the vectors test nothing", valid, len(v.Vectors))
	}
}

// The committed vectors are what Bolt says today: vectors.mjs, run again
// with the installed @slack/bolt, prints them unchanged.
func TestBoltVectorsAreBolts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node; skipped with -short")
	}
	script := filepath.Join("..", "..", "testdata", "slack-bolt", "vectors.mjs")
	if _, err := os.Stat(filepath.Join("..", "..", "testdata", "slack-bolt", "node_modules", "@slack", "bolt", "package.json")); err != nil {
		msg := "SKIPPING the Bolt vector check: @slack/bolt is not installed (run scripts/peers/slack-bolt.sh)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out, err := exec.Command("node", script).Output()
	if err != nil {
		t.Fatalf("node vectors.mjs: %v", err)
	}
	want, _ := os.ReadFile("testdata/bolt-vectors.json")
	if string(out) != string(want) {
		t.Errorf("Bolt's verdicts changed: regenerate with node testdata/slack-bolt/vectors.mjs > channels/slack/testdata/bolt-vectors.json and look at why\n%s", out)
	}
}

// beachd is stricter than Bolt in one respect: a timestamp more than five
// minutes ahead of our clock is refused too (Bolt refuses only old ones).
func TestVerifyRefuses(t *testing.T) {
	now := time.Unix(1767225600, 0)
	secret := "8f742231b10e8888abcd99aaabbb85a5"
	body := []byte("payload=%7B%7D")
	sign := func(ts string) http.Header {
		h := http.Header{}
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, SignatureHeader(secret, ts, body))
		return h
	}
	for _, tc := range []struct {
		name string
		h    http.Header
		want error
	}{
		{"future", sign("1767225901"), ErrStale},
		{"no headers", http.Header{}, ErrNoSignature},
		{"not a number", sign("17672256e2"), ErrBadTimestamp},
		{"negative", sign("-1767225600"), ErrStale},
	} {
		if err := Verify(tc.h, body, secret, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := Verify(sign("1767225600"), body, "", now); err == nil {
		t.Error("no secret: accepted")
	}
	if err := Verify(sign("1767225600"), body, secret, now); err != nil {
		t.Errorf("signed now: %v", err)
	}
}
