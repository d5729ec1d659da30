package agent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/cool-ai/beachd/envelope"
)

// beachd's own A2A types. They follow A2A 1.0 (a2a.proto and its JSON
// mapping: parts by member, ROLE_*, TASK_STATE_*); the 0.3 codec converts
// to and from them, so nothing outside this package sees a generation.

// Role says who sent a message.
type Role string

// Roles (A2A 1.0 enum names).
const (
	RoleUser  Role = "ROLE_USER"
	RoleAgent Role = "ROLE_AGENT"
)

// TaskState is a task's lifecycle state (A2A 1.0 enum names).
type TaskState string

// Task states.
const (
	StateSubmitted     TaskState = "TASK_STATE_SUBMITTED"
	StateWorking       TaskState = "TASK_STATE_WORKING"
	StateCompleted     TaskState = "TASK_STATE_COMPLETED"
	StateFailed        TaskState = "TASK_STATE_FAILED"
	StateCanceled      TaskState = "TASK_STATE_CANCELED"
	StateInputRequired TaskState = "TASK_STATE_INPUT_REQUIRED"
	StateRejected      TaskState = "TASK_STATE_REJECTED"
	StateAuthRequired  TaskState = "TASK_STATE_AUTH_REQUIRED"
)

var knownStates = map[TaskState]bool{StateSubmitted: true, StateWorking: true, StateCompleted: true,
	StateFailed: true, StateCanceled: true, StateInputRequired: true, StateRejected: true, StateAuthRequired: true}

// Terminal reports whether no further change of the task can happen.
func (s TaskState) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCanceled || s == StateRejected
}

// Settled reports whether a turn in state s has ended for now: terminal,
// or interrupted (input or authentication required — a turn suspended on
// an approval, typically).
func (s TaskState) Settled() bool {
	return s.Terminal() || s == StateInputRequired || s == StateAuthRequired
}

// maxList bounds every list a decoder builds (parts, artifacts, history).
const maxList = envelope.MaxDecodedParts

// Part is one piece of content: exactly one of Text, Raw, URL or Data.
// Data holds any JSON value; Raw is the decoded bytes of a file.
type Part struct {
	Text      *string
	Raw       []byte
	URL       string
	Data      json.RawMessage
	Metadata  map[string]any
	Filename  string
	MediaType string
}

// TextPart returns a text part with metadata (which may be nil).
func TextPart(s string, meta map[string]any) Part { return Part{Text: &s, Metadata: meta} }

// partWire is a part as it travels in A2A 1.0 JSON.
//
// The content members are omitzero, not omitempty: JSON v2's omitempty
// also drops a present but empty value ("text": "", "data": {}), which
// would turn a part the decoder accepted into one with no content.
type partWire struct {
	Text      *string        `json:"text,omitzero"`
	Raw       *string        `json:"raw,omitzero"`
	URL       *string        `json:"url,omitzero"`
	Data      jsontext.Value `json:"data,omitzero"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Filename  string         `json:"filename,omitempty"`
	MediaType string         `json:"mediaType,omitempty"`
}

// MarshalJSON writes the part's one content member and its attributes.
func (p Part) MarshalJSON() ([]byte, error) {
	w := partWire{Metadata: p.Metadata, Filename: p.Filename, MediaType: p.MediaType}
	switch {
	case p.Text != nil:
		w.Text = p.Text
	case p.Data != nil:
		w.Data = jsontext.Value(p.Data)
	case p.URL != "":
		w.URL = &p.URL
	default:
		s := base64.StdEncoding.EncodeToString(p.Raw)
		w.Raw = &s
	}
	return jsonv2.Marshal(w)
}

// UnmarshalJSON decodes strictly (see UnmarshalJSONFrom).
func (p *Part) UnmarshalJSON(b []byte) error { return jsonv2.Unmarshal(b, p) }

// UnmarshalJSONFrom decodes a 1.0 part: an object with exactly one of
// text, raw (base64), url or data.
func (p *Part) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	var w partWire
	if err := jsonv2.UnmarshalDecode(dec, &w); err != nil {
		return err
	}
	n := 0
	*p = Part{Metadata: w.Metadata, Filename: w.Filename, MediaType: w.MediaType}
	if w.Text != nil {
		n++
		p.Text = w.Text
	}
	if w.Raw != nil {
		n++
		raw, err := decodeBase64(*w.Raw)
		if err != nil {
			return fmt.Errorf("part raw: %w", err)
		}
		p.Raw = raw
	}
	if w.URL != nil {
		n++
		if *w.URL == "" {
			return errors.New("part url is empty")
		}
		p.URL = *w.URL
	}
	if w.Data != nil {
		n++
		p.Data = json.RawMessage(w.Data.Clone())
	}
	if n != 1 {
		return fmt.Errorf("a part must have exactly one of text, raw, url, data (it has %d)", n)
	}
	return nil
}

// decodeBase64 accepts the standard and URL-safe alphabets, padded or not,
// as the protobuf JSON mapping of bytes does.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// Parts, Messages and Artifacts decode at most maxList elements.
type (
	Parts     []Part
	Messages  []Message
	Artifacts []Artifact
)

// UnmarshalJSONFrom implements the bounded decode.
func (l *Parts) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return envelope.DecodeList((*[]Part)(l), dec, maxList, "parts")
}

// UnmarshalJSONFrom implements the bounded decode.
func (l *Messages) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return envelope.DecodeList((*[]Message)(l), dec, maxList, "messages")
}

// UnmarshalJSONFrom implements the bounded decode.
func (l *Artifacts) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return envelope.DecodeList((*[]Artifact)(l), dec, maxList, "artifacts")
}

// Message is one unit of communication.
type Message struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             Role           `json:"role"`
	Parts            Parts          `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

// Task is the agent's unit of work; a turn, for beachd.
type Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId,omitempty"`
	Status    TaskStatus     `json:"status"`
	Artifacts Artifacts      `json:"artifacts,omitempty"`
	History   Messages       `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskStatus is a task's state with the message that goes with it.
type TaskStatus struct {
	State     TaskState `json:"state"`
	Message   *Message  `json:"message,omitempty"`
	Timestamp string    `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       Parts          `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// check validates what beachd relies on in a decoded message.
func (m *Message) check(path string) error {
	if m.MessageID == "" {
		return fmt.Errorf("%s.messageId: missing", path)
	}
	if m.Role != RoleUser && m.Role != RoleAgent {
		return fmt.Errorf("%s.role: %q is not ROLE_USER or ROLE_AGENT", path, clip(string(m.Role)))
	}
	return nil
}

// check validates what beachd relies on in a decoded task.
func (t *Task) check(path string) error {
	if t.ID == "" {
		return fmt.Errorf("%s.id: missing", path)
	}
	if !knownStates[t.Status.State] {
		return fmt.Errorf("%s.status.state: %q is not a known task state", path, clip(string(t.Status.State)))
	}
	if t.Status.Message != nil {
		if err := t.Status.Message.check(path + ".status.message"); err != nil {
			return err
		}
	}
	for i := range t.History {
		if err := t.History[i].check(fmt.Sprintf("%s.history[%d]", path, i)); err != nil {
			return err
		}
	}
	return nil
}

// sendResult10 is SendMessageResponse: exactly one of message or task.
type sendResult10 struct {
	Message *Message `json:"message"`
	Task    *Task    `json:"task"`
}

// DecodeSendResult decodes an A2A 1.0 SendMessage result: {"message":…}
// or {"task":…}, exactly one.
func DecodeSendResult(b []byte) (*Message, *Task, error) {
	var r sendResult10
	if err := unmarshalStrict(b, &r); err != nil {
		return nil, nil, fmt.Errorf("decode SendMessage result: %w", err)
	}
	switch {
	case r.Message != nil && r.Task != nil:
		return nil, nil, errors.New("decode SendMessage result: both message and task")
	case r.Message != nil:
		if err := r.Message.check("message"); err != nil {
			return nil, nil, fmt.Errorf("decode SendMessage result: %w", err)
		}
		return r.Message, nil, nil
	case r.Task != nil:
		if err := r.Task.check("task"); err != nil {
			return nil, nil, fmt.Errorf("decode SendMessage result: %w", err)
		}
		return nil, r.Task, nil
	}
	return nil, nil, errors.New("decode SendMessage result: neither message nor task")
}

// DecodeTask decodes an A2A 1.0 Task (the GetTask result).
func DecodeTask(b []byte) (*Task, error) {
	var t Task
	if err := unmarshalStrict(b, &t); err != nil {
		return nil, fmt.Errorf("decode task: %w", err)
	}
	if err := t.check("task"); err != nil {
		return nil, fmt.Errorf("decode task: %w", err)
	}
	return &t, nil
}

// unmarshalStrict decodes one JSON object: names are case-sensitive,
// duplicates and invalid UTF-8 are refused; unknown members are ignored so
// that agents can add fields.
func unmarshalStrict(b []byte, v any) error {
	if k := firstByte(b); k != '{' {
		return errors.New("not a JSON object")
	}
	return jsonv2.Unmarshal(b, v)
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// clip bounds text from outside before it goes into an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
