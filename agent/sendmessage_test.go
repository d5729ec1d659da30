package agent_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/agent/agenttest"
)

// echoed is what an echoing peer says it received (both peers answer
// "echo:" with a data part of this shape).
type echoed struct {
	ContextID string         `json:"contextId"`
	MessageID string         `json:"messageId"`
	Metadata  map[string]any `json:"metadata"`
	Parts     []struct {
		Kind      string `json:"kind"`
		Filename  string `json:"filename"`
		MediaType string `json:"mediaType"`
		Text      string `json:"text"`
		Size      int    `json:"size"`
		URL       string `json:"url"`
	} `json:"parts"`
}

func conversationMessage(id string) *agent.Message {
	text := "echo: flights to Lisbon for six, see the attached list"
	return &agent.Message{MessageID: id, ContextID: "cnv_lisbon", Role: agent.RoleUser,
		Metadata: map[string]any{"channel": "email", "from": "ana@example.org", "subject": "Flights"},
		Parts: agent.Parts{
			agent.TextPart(text, nil),
			{Raw: make([]byte, 1234), Filename: "travellers.csv", MediaType: "text/csv"},
			{URL: "https://beachd.example.org/v1/inbound/inb_1/attachments/2?expires=1&sig=x", Filename: "passport.jpg", MediaType: "image/jpeg"},
		}}
}

// echoOf reads the echo data part of the agent's immediate answer.
func echoOf(t *testing.T, turn *agent.Turn) echoed {
	t.Helper()
	if turn.Message == nil {
		t.Fatalf("turn %+v: want an immediate message", turn)
	}
	for _, p := range turn.Message.Parts {
		if p.Data != nil && p.Metadata["partType"] == "echo" {
			var e echoed
			if err := json.Unmarshal(p.Data, &e); err != nil {
				t.Fatal(err)
			}
			return e
		}
	}
	t.Fatalf("answer %+v has no echo part", turn.Message)
	return echoed{}
}

// TestSendMessageBothGenerations sends a caller-built message — its own
// id, a conversation's contextId, a text part, a file of bytes, a file by
// URL and message metadata — to the A2A 1.0 JS SDK agent over both
// bindings and to the a2a-go 0.3 agent, and checks what each agent says it
// received; the same message sent again arrives with the same id.
func TestSendMessageBothGenerations(t *testing.T) {
	type peerCase struct {
		name string
		// start returns the peer's a2a_url and, for the JS peer, what it recorded.
		start func(t *testing.T) (string, func(ctx context.Context) ([]a2ajstest.Seen, error))
	}
	js := func(b string) func(t *testing.T) (string, func(ctx context.Context) ([]a2ajstest.Seen, error)) {
		return func(t *testing.T) (string, func(ctx context.Context) ([]a2ajstest.Seen, error)) {
			s := a2ajstest.Start(t, a2ajstest.Options{Bindings: b})
			return s.JSONRPC, func(ctx context.Context) ([]a2ajstest.Seen, error) {
				r, err := s.Received(ctx)
				if err != nil {
					return nil, err
				}
				return r.Messages, nil
			}
		}
	}
	cases := []peerCase{{"js-1.0-jsonrpc", js("jsonrpc")}, {"js-1.0-rest", js("rest")},
		{"a2a-go-0.3", func(t *testing.T) (string, func(ctx context.Context) ([]a2ajstest.Seen, error)) {
			g := agenttest.StartOn(nil, true)
			t.Cleanup(g.Close)
			return g.URL, nil
		}}}
	for _, pc := range cases {
		t.Run(pc.name, func(t *testing.T) {
			url, seenFn := pc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := clientFor(t, url, "")
			msg := conversationMessage("inb_" + pc.name)
			keep := conversationMessage("inb_" + pc.name)
			for round := 1; round <= 2; round++ {
				turn, err := c.SendMessage(ctx, "travel", msg)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(msg, keep) {
					t.Fatalf("SendMessage changed the caller's message: %+v", msg)
				}
				if turn.ContextID != "cnv_lisbon" {
					t.Errorf("turn context %q, want cnv_lisbon", turn.ContextID)
				}
				e := echoOf(t, turn)
				if e.ContextID != "cnv_lisbon" || e.MessageID != msg.MessageID {
					t.Errorf("round %d: agent received context %q message %q, want cnv_lisbon %s", round, e.ContextID, e.MessageID, msg.MessageID)
				}
				if !reflect.DeepEqual(e.Metadata, msg.Metadata) {
					t.Errorf("agent received metadata %v, want %v", e.Metadata, msg.Metadata)
				}
				if len(e.Parts) != 3 {
					t.Fatalf("agent received %d parts: %+v", len(e.Parts), e.Parts)
				}
				p := e.Parts
				if p[0].Kind != "text" || p[0].Text != *msg.Parts[0].Text {
					t.Errorf("part 0: %+v", p[0])
				}
				if p[1].Kind != "raw" || p[1].Filename != "travellers.csv" || p[1].MediaType != "text/csv" || p[1].Size != 1234 {
					t.Errorf("part 1 (bytes): %+v", p[1])
				}
				if p[2].Kind != "url" || p[2].Filename != "passport.jpg" || p[2].MediaType != "image/jpeg" || p[2].URL != msg.Parts[2].URL {
					t.Errorf("part 2 (url): %+v", p[2])
				}
				env, err := c.WaitTurn(ctx, "travel", turn, 10*time.Millisecond)
				if err != nil || env.Meta.SessionID != "cnv_lisbon" || env.Meta.FinalizedBy != "complete" {
					t.Fatalf("answer envelope %+v, %v", env, err)
				}
			}
			if seenFn != nil {
				seen, err := seenFn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(seen) != 2 || seen[0].MessageID != msg.MessageID || seen[1].MessageID != msg.MessageID {
					t.Fatalf("agent recorded %+v, want the message twice under one id", seen)
				}
			}
		})
	}
}

// TestSendMessageRefusesUnreadable: a message no agent could read fails
// before any request, permanently.
func TestSendMessageRefusesUnreadable(t *testing.T) {
	c := clientFor(t, "http://127.0.0.1:1/", agent.V10)
	_, err := c.SendMessage(context.Background(), "travel", &agent.Message{MessageID: "m", ContextID: "c"})
	if err == nil || !agent.IsPermanent(err) {
		t.Fatalf("a message without parts: %v, want a permanent error", err)
	}
}
