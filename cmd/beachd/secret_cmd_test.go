package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/webhook"
)

// `beachd secret webhook` prints a whsec_ secret of 32 random bytes, new
// each time, that `beachd config check` accepts as an endpoint's secret
// and an agent's webhook_secret, and with which the webhook signer signs
// what its verifier then accepts.
func TestSecretWebhook(t *testing.T) {
	secret := func() string {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"secret", "webhook"}, env(nil), &out, &errb); code != 0 || errb.Len() > 0 {
			t.Fatalf("secret webhook: %d %q %q", code, out.String(), errb.String())
		}
		s, ok := strings.CutSuffix(out.String(), "\n")
		if !ok || strings.Contains(s, "\n") {
			t.Fatalf("not one line: %q", out.String())
		}
		return s
	}
	s1, s2 := secret(), secret()
	if s1 == s2 {
		t.Fatalf("the same secret twice: %s", s1)
	}
	// whsec_ + base64 of 32 bytes: 44 characters, one "=" of padding.
	if !strings.HasPrefix(s1, "whsec_") || len(s1) != len("whsec_")+44 || !strings.HasSuffix(s1, "=") {
		t.Fatalf("secret %q is not whsec_ and the base64 of 32 bytes", s1)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "beachd.yaml")
	os.WriteFile(path, []byte(`listen: 127.0.0.1:1
data_dir: `+dir+`
api_keys: ["0123456789abcdef"]
webhooks:
  endpoints:
    ops: {url: https://ops.example.org/hook, secrets: ["${NEW_SECRET}", "`+s2+`"]}
agents:
  travel: {a2a_url: http://127.0.0.1:9000/, injector: webhook, webhook_url: "https://travel.example.org/i", webhook_secret: "${NEW_SECRET}"}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"config", "check", "--config", path}, env(map[string]string{"NEW_SECRET": s1}), &out, &errb); code != 0 {
		t.Fatalf("config check refuses the generated secret: %d %s %s", code, out.String(), errb.String())
	}
	sec, err := webhook.ParseSecret(s1)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := webhook.NewSigner(sec)
	if err != nil {
		t.Fatal(err)
	}
	h, body, now := http.Header{}, []byte(`{"hello":"world"}`), time.Now()
	signer.SetHeaders(h, "msg_1", now, body)
	if err := webhook.Verify([]webhook.Secret{sec}, h, body, now, time.Minute); err != nil {
		t.Errorf("a signature with the generated secret does not verify: %v", err)
	}
	other, _ := webhook.ParseSecret(s2)
	if err := webhook.Verify([]webhook.Secret{other}, h, body, now, time.Minute); err == nil {
		t.Error("another generated secret verifies the signature")
	}
}
