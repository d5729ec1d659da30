package agent

import (
	"encoding/json"
	"reflect"
	"testing"
)

// outgoing is a user message with every kind of part beachd sends.
func outgoing() *Message {
	note := "Flights to Lisbon, please."
	return &Message{MessageID: "inb_1", ContextID: "cnv_1", Role: RoleUser,
		Metadata: map[string]any{"channel": "email", "from": "ana@example.org"},
		Parts: Parts{
			{Text: &note},
			{Raw: []byte("%PDF-1.7 ticket"), Filename: "ticket.pdf", MediaType: "application/pdf"},
			{URL: "https://beachd.example.org/v1/inbound/inb_1/attachments/2?sig=x", Filename: "photo.jpg", MediaType: "image/jpeg"},
		}}
}

func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEncodeFilePartsBothGenerations pins the wire form of file parts and
// message metadata: 1.0 {"raw"|"url","filename","mediaType"}; 0.3
// {"kind":"file","file":{"name","mimeType","bytes"|"uri"}}.
func TestEncodeFilePartsBothGenerations(t *testing.T) {
	want10 := map[string]any{"messageId": "inb_1", "contextId": "cnv_1", "role": "ROLE_USER",
		"metadata": map[string]any{"channel": "email", "from": "ana@example.org"},
		"parts": []any{
			map[string]any{"text": "Flights to Lisbon, please."},
			map[string]any{"raw": "JVBERi0xLjcgdGlja2V0", "filename": "ticket.pdf", "mediaType": "application/pdf"},
			map[string]any{"url": "https://beachd.example.org/v1/inbound/inb_1/attachments/2?sig=x", "filename": "photo.jpg", "mediaType": "image/jpeg"},
		}}
	if got := asJSON(t, outgoing()); !reflect.DeepEqual(got, want10) {
		t.Errorf("1.0:\n got %v\nwant %v", got, want10)
	}
	want03 := map[string]any{"kind": "message", "messageId": "inb_1", "contextId": "cnv_1", "role": "user",
		"metadata": map[string]any{"channel": "email", "from": "ana@example.org"},
		"parts": []any{
			map[string]any{"kind": "text", "text": "Flights to Lisbon, please."},
			map[string]any{"kind": "file", "file": map[string]any{"name": "ticket.pdf", "mimeType": "application/pdf", "bytes": "JVBERi0xLjcgdGlja2V0"}},
			map[string]any{"kind": "file", "file": map[string]any{"name": "photo.jpg", "mimeType": "image/jpeg",
				"uri": "https://beachd.example.org/v1/inbound/inb_1/attachments/2?sig=x"}},
		}}
	if got := asJSON(t, toMessage03(outgoing())); !reflect.DeepEqual(got, want03) {
		t.Errorf("0.3:\n got %v\nwant %v", got, want03)
	}
	// Both decode back to the same message.
	b10, _ := json.Marshal(outgoing())
	var m10 Message
	if err := unmarshalStrict(b10, &m10); err != nil {
		t.Fatal(err)
	}
	b03, _ := json.Marshal(toMessage03(outgoing()))
	var w03 message03
	if err := unmarshalStrict(b03, &w03); err != nil {
		t.Fatal(err)
	}
	m03, err := w03.message("message")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&m10, outgoing()) || !reflect.DeepEqual(m03, outgoing()) {
		t.Errorf("round trip:\n1.0 %+v\n0.3 %+v\nwant %+v", m10, m03, outgoing())
	}
}

func TestCheckOutgoing(t *testing.T) {
	s := "x"
	bad := map[string]*Message{
		"nil":        nil,
		"no parts":   {MessageID: "m"},
		"agent role": {MessageID: "m", Role: RoleAgent, Parts: Parts{{Text: &s}}},
		"empty part": {MessageID: "m", Parts: Parts{{Filename: "a.txt"}}},
		"two":        {MessageID: "m", Parts: Parts{{Text: &s, URL: "http://x/"}}},
	}
	for name, m := range bad {
		if err := checkOutgoing(m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := checkOutgoing(outgoing()); err != nil {
		t.Error(err)
	}
	if err := checkOutgoing(&Message{Parts: Parts{{Raw: []byte{}, Filename: "empty.txt"}}}); err != nil {
		t.Errorf("an empty file: %v", err)
	}
}
