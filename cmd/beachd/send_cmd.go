package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// SendCmd posts an envelope, or a whole delivery request, to a running
// beachd.
type SendCmd struct {
	apiFlags
	File           string   `arg:"" optional:"" help:"An envelope, or a whole delivery request ({\"envelope\", \"to\", \"agent\"}, the body of POST /v1/deliveries), as a JSON file (or - for standard input)." type:"path"`
	Sample         string   `name:"sample" enum:",approval" default:"" help:"Send a sample envelope instead of a file: 'approval' asks for an approval with a new approvalId in a new turn of the dev agent, so it can be sent again and again (beachd dev)."`
	To             []string `name:"to" help:"Recipient as channel:address, e.g. email:alice@example.org, sms:+447700900123, webhook:ops, conversation:cnv_… (the conversation's current channel and thread). Repeatable. Required with an envelope file; with a delivery request it replaces the request's recipients; with --sample the default is the dev recipients."`
	Agent          string   `help:"Agent that receives approval decisions (with a delivery request: replaces its agent)."`
	IdempotencyKey string   `name:"idempotency-key" help:"Idempotency-Key header."`
}

// Run sends the envelope.
func (c *SendCmd) Run(g *globals) error {
	var raw []byte
	var err error
	name := c.File
	switch {
	case c.Sample != "" && c.File != "":
		return &exitError{code: 2, err: fmt.Errorf("give an envelope file or --sample, not both")}
	case c.Sample == "approval":
		var id string
		raw, id, err = sampleApproval(time.Now(), rand.Reader)
		if err != nil {
			return err
		}
		if len(c.To) == 0 {
			c.To = devRecipients
		}
		if c.Agent == "" {
			c.Agent = devAgentName
		}
		name = "the sample"
		fmt.Fprintf(g.stderr, "sample approval %s\n", id)
	case c.File == "":
		return &exitError{code: 2, err: fmt.Errorf("an envelope file (or - for standard input), or --sample approval, is required")}
	case c.File == "-":
		raw, err = envelope.ReadLimited(os.Stdin, envelope.DefaultLimits.MaxBytes+1<<20)
		name = "standard input"
	default:
		raw, err = os.ReadFile(c.File)
	}
	if err != nil {
		return fmt.Errorf("read envelope: %w", err)
	}
	body, err := c.request(name, raw)
	if err != nil {
		return err
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

// request is the POST /v1/deliveries body for raw, the file's bytes:
// raw itself when it is a whole delivery request (a JSON object with an
// "envelope" member), with --to and --agent replacing its recipients and
// agent; else raw as the envelope, to --to. It is checked as the API
// checks a request before it looks at the configuration (api.
// DecodeDeliveryRequest), so that a file that is not JSON, or has a
// member that does not belong, is told with the path of each problem,
// without a round trip.
func (c *SendCmd) request(name string, raw []byte) ([]byte, error) {
	var req api.DeliveryRequest
	whole := isDeliveryRequest(raw)
	if whole {
		r, _, err := api.DecodeDeliveryRequest(raw, localLimits)
		if err != nil {
			return nil, invalidFile(name, "invalid delivery request", err)
		}
		req = *r
	} else {
		if _, err := envelope.Decode(raw, localLimits); err != nil {
			return nil, invalidFile(name, "invalid envelope", err)
		}
		req.Envelope = raw
	}
	if len(c.To) > 0 {
		to, err := parseRecipients(c.To)
		if err != nil {
			return nil, &exitError{code: 2, err: err}
		}
		req.To = to
	}
	if c.Agent != "" {
		req.Agent = c.Agent
	}
	if len(req.To) == 0 {
		if whole {
			return nil, &exitError{code: 2, err: fmt.Errorf("%s names no recipients (\"to\"): add them there or pass --to channel:address", name)}
		}
		return nil, &exitError{code: 2, err: fmt.Errorf("--to is required: %s is an envelope, without recipients (a delivery request file names them in \"to\")", name)}
	}
	if whole && len(c.To) == 0 && c.Agent == "" {
		return raw, nil // as the file has it, byte for byte
	}
	body, err := json.Marshal(&req)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	return body, nil
}

// localLimits bound nothing the server would not: the file is checked
// for its form here, and against the configured limits by the server.
var localLimits = envelope.Limits{MaxBytes: 1 << 40, MaxParts: 1 << 30}

// isDeliveryRequest reports whether raw is a JSON object with a member of
// a delivery request (envelope, to, agent, or recipients, a name people
// give to "to"): a whole request rather than an envelope (whose members
// are role, parts, meta…).
func isDeliveryRequest(raw []byte) bool {
	var top map[string]jsontext.Value
	if jsonv2.Unmarshal(raw, &top, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) != nil {
		return false
	}
	for _, k := range []string{"envelope", "to", "agent", "recipients"} {
		if _, ok := top[k]; ok {
			return true
		}
	}
	return false
}

// invalidFile says what is wrong with a file, as the API would: a title,
// then each problem on a line of its own, with its path.
func invalidFile(name, title string, err error) error {
	var ve *envelope.ValidationError
	var tl *envelope.TooLargeError
	switch {
	case errors.As(err, &ve):
		msg := name + ": " + title
		for _, p := range ve.Problems {
			if p.Path != "" {
				msg += "\n  " + p.Path + ": " + p.Reason
			} else {
				msg += "\n  " + p.Reason
			}
		}
		return errors.New(msg)
	case errors.As(err, &tl):
		return fmt.Errorf("%s: %s", name, tl.Error())
	}
	return fmt.Errorf("%s: %s: %w", name, title, err)
}

// devRecipients are the recipients `beachd dev` configures: its mailbox,
// its SMS number and its webhook sink.
var devRecipients = []string{"email:you@beachd.localhost", "sms:+15555550100", "webhook:" + devSinkEndpoint}

// sampleApproval is the sample approval-request envelope with a new
// approvalId and a new turn. An approvalId is accepted once, and a
// decision is injected into the turn that asked; a turn that already
// received its decision is over, so a repeated sample needs both anew. The
// dev agent takes a decision for a turn it has not seen as one it
// suspended.
func sampleApproval(now time.Time, rnd io.Reader) ([]byte, string, error) {
	var b [8]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return nil, "", fmt.Errorf("sample ids: %w", err)
	}
	suffix := hex.EncodeToString(b[:])
	id, turn, session := "appr_dev_"+suffix, "turn_dev_"+suffix, "sess_dev"
	text := "I'm ready to book **British Airways BA2043** for all 6 of you. This charges £1,122 to the card ending 4242, so I need your go-ahead first."
	env := envelope.Envelope{Role: "agent",
		Parts: []envelope.Part{
			{Text: &text, Metadata: map[string]any{"partType": envelope.PartResponse}},
			{Data: mustRaw(map[string]any{"approvalId": id, "toolName": "book_flight", "toolCallId": "toolu_" + suffix,
				"args":    map[string]any{"flightNumber": "BA2043", "date": "2026-08-15", "passengers": 6, "totalPrice": map[string]any{"amount": 1122, "currency": "GBP"}},
				"handler": "travel-booker", "turn": turn, "session": session,
				"summary": "Book BA2043 (LGW→CFU, 15 Aug) for 6 people, £1,122 total",
				"reason":  "Booking charges the card on file and is refundable only within 24 hours."}),
				Metadata: map[string]any{"partType": envelope.PartApprovalRequest}},
		},
		Meta: envelope.Meta{SessionID: session, TurnID: turn, ProducedAt: now.UTC(), FinalizedBy: "suspended"}}
	raw, err := json.Marshal(&env)
	if err != nil {
		return nil, "", fmt.Errorf("encode sample: %w", err)
	}
	return raw, id, nil
}

func mustRaw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a literal map of strings and numbers
	}
	return b
}

func parseRecipients(specs []string) ([]envelope.Recipient, error) {
	var out []envelope.Recipient
	for _, s := range specs {
		ch, addr, ok := strings.Cut(s, ":")
		if !ok || addr == "" {
			return nil, fmt.Errorf("--to %q: expected channel:address", s)
		}
		r := envelope.Recipient{Channel: ch, Address: addr}
		if ch == "conversation" {
			// A conversation: its current channel, address and thread.
			out = append(out, envelope.Recipient{Conversation: addr})
			continue
		}
		if spec, _ := envelope.Channel(ch); spec.Address == envelope.AddressEndpoint {
			r = envelope.Recipient{Channel: ch, Endpoint: addr}
		}
		out = append(out, r)
	}
	return out, nil
}
