package main

import (
	"crypto/rand"
	"fmt"
	"io"

	"github.com/cool-ai/beachd/channels/webhook"
)

// SecretCmd groups the commands that make secrets for the configuration.
type SecretCmd struct {
	Webhook SecretWebhookCmd `cmd:"" help:"Print a new Standard Webhooks signing secret (whsec_ and the base64 of 32 random bytes) for webhooks.endpoints.NAME.secret or agents.NAME.webhook_secret."`
}

// SecretWebhookCmd prints a new webhook signing secret.
type SecretWebhookCmd struct{}

// Run prints the secret on a line of its own, nothing else, so that it can
// be captured: OPS_SECRET=$(beachd secret webhook).
func (SecretWebhookCmd) Run(g *globals) error {
	s, err := newWebhookSecret(rand.Reader)
	if err != nil {
		return err
	}
	fmt.Fprintln(g.stdout, s)
	return nil
}

// webhookSecretBytes is the length of a generated key: 256 bits, within
// the 24 to 64 bytes Standard Webhooks allows.
const webhookSecretBytes = 32

// newWebhookSecret is "whsec_" and the base64 of 32 bytes read from rnd,
// encoded by the webhook package, whose ParseSecret reads it back.
func newWebhookSecret(rnd io.Reader) (string, error) {
	key := make([]byte, webhookSecretBytes)
	if _, err := io.ReadFull(rnd, key); err != nil {
		return "", fmt.Errorf("random bytes: %w", err)
	}
	s, err := webhook.NewSecret(key)
	if err != nil {
		return "", err
	}
	return s.Encode(), nil
}
