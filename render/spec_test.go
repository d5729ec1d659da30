package render

import (
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// A channel that has no spec is refused by name, by the content builder
// every renderer shares and by Notice, never rendered as some other channel.
func TestRenderRefusesUnknownChannel(t *testing.T) {
	r := newTestRenderer(t, Config{})
	text := "hello"
	env := &envelope.Envelope{Role: "agent", Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": envelope.PartResponse}}},
		Meta: envelope.Meta{SessionID: "s", TurnID: "t", ProducedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), FinalizedBy: "complete"}}
	if _, err := r.build(&Input{Envelope: env}, "telegram"); err == nil || !strings.Contains(err.Error(), `"telegram"`) {
		t.Errorf("build on telegram: err = %v, want one naming the channel", err)
	}
	if _, err := r.Notice(KindApprovalConfirmation, NoticeInput{Channel: "telegram", Summary: "x"}); err == nil || !strings.Contains(err.Error(), `"telegram"`) {
		t.Errorf("Notice on telegram: err = %v, want one naming the channel", err)
	}
	if _, err := r.Notice(KindApprovalConfirmation, NoticeInput{Channel: envelope.ChannelWebhook, Summary: "x"}); err == nil {
		t.Errorf("Notice on webhook: no error; a machine peer gets no notices")
	}
	// Every channel of the table builds.
	for _, n := range envelope.ChannelNames() {
		if _, err := r.build(&Input{Envelope: env}, n); err != nil {
			t.Errorf("build on %s: %v", n, err)
		}
	}
}
