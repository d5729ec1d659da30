package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/cool-ai/beachd/envelope"
)

// SendCmd posts an envelope to a running beachd.
type SendCmd struct {
	apiFlags
	File           string   `arg:"" help:"Envelope JSON file (or - for standard input)." type:"path"`
	To             []string `name:"to" required:"" help:"Recipient as channel:address, e.g. email:alice@example.org, sms:+447700900123, webhook:ops. Repeatable."`
	Agent          string   `help:"Agent that receives approval decisions."`
	IdempotencyKey string   `name:"idempotency-key" help:"Idempotency-Key header."`
}

// Run sends the envelope.
func (c *SendCmd) Run(g *globals) error {
	var raw []byte
	var err error
	if c.File == "-" {
		raw, err = envelope.ReadLimited(os.Stdin, envelope.DefaultLimits.MaxBytes)
	} else {
		raw, err = os.ReadFile(c.File)
	}
	if err != nil {
		return fmt.Errorf("read envelope: %w", err)
	}
	to, err := parseRecipients(c.To)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	body, err := json.Marshal(map[string]any{"envelope": json.RawMessage(raw), "to": to, "agent": c.Agent})
	if err != nil {
		return fmt.Errorf("%s: not JSON: %w", c.File, err)
	}
	var hdr map[string]string
	if c.IdempotencyKey != "" {
		hdr = map[string]string{"Idempotency-Key": c.IdempotencyKey}
	}
	var out json.RawMessage
	if err := c.callWith("POST", "/v1/deliveries", body, &out, hdr); err != nil {
		return err
	}
	return printJSON(g.stdout, out)
}

func parseRecipients(specs []string) ([]envelope.Recipient, error) {
	var out []envelope.Recipient
	for _, s := range specs {
		ch, addr, ok := strings.Cut(s, ":")
		if !ok || addr == "" {
			return nil, fmt.Errorf("--to %q: expected channel:address", s)
		}
		r := envelope.Recipient{Channel: ch, Address: addr}
		if ch == envelope.ChannelWebhook {
			r = envelope.Recipient{Channel: ch, Endpoint: addr}
		}
		out = append(out, r)
	}
	return out, nil
}
