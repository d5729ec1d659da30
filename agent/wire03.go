package agent

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/cool-ai/beachd/envelope"
)

// The A2A 0.3 JSON codec: objects carry a "kind" discriminator, roles and
// states are lowercase words, files nest under "file". It converts to and
// from beachd's own (1.0-shaped) types.

var roles03 = map[string]Role{"user": RoleUser, "agent": RoleAgent}

var states03 = map[string]TaskState{"submitted": StateSubmitted, "working": StateWorking,
	"completed": StateCompleted, "failed": StateFailed, "canceled": StateCanceled,
	"input-required": StateInputRequired, "rejected": StateRejected, "auth-required": StateAuthRequired}

type part03 struct {
	Kind     string         `json:"kind"`
	Text     *string        `json:"text,omitempty"`
	Data     jsontext.Value `json:"data,omitempty"`
	File     *file03        `json:"file,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

type file03 struct {
	Name     string  `json:"name,omitempty"`
	MimeType string  `json:"mimeType,omitempty"`
	Bytes    *string `json:"bytes,omitempty"`
	URI      *string `json:"uri,omitempty"`
}

type parts03 []part03

func (l *parts03) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return envelope.DecodeList((*[]part03)(l), dec, maxList, "parts")
}

type messages03 []message03

func (l *messages03) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return envelope.DecodeList((*[]message03)(l), dec, maxList, "messages")
}

type artifacts03 []artifact03

func (l *artifacts03) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return envelope.DecodeList((*[]artifact03)(l), dec, maxList, "artifacts")
}

type message03 struct {
	Kind             string         `json:"kind"`
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             string         `json:"role"`
	Parts            parts03        `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

type artifact03 struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       parts03        `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

type task03 struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State     string     `json:"state"`
		Message   *message03 `json:"message"`
		Timestamp string     `json:"timestamp"`
	} `json:"status"`
	Artifacts artifacts03    `json:"artifacts"`
	History   messages03     `json:"history"`
	Metadata  map[string]any `json:"metadata"`
}

// toMessage03 encodes m for the 0.3 wire.
func toMessage03(m *Message) message03 {
	out := message03{Kind: "message", MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID,
		Role: "user", Metadata: m.Metadata, ReferenceTaskIDs: m.ReferenceTaskIDs, Parts: parts03{}}
	if m.Role == RoleAgent {
		out.Role = "agent"
	}
	for _, p := range m.Parts {
		q := part03{Metadata: p.Metadata}
		switch {
		case p.Text != nil:
			q.Kind, q.Text = "text", p.Text
		case p.Data != nil:
			q.Kind, q.Data = "data", jsontext.Value(p.Data)
		case p.URL != "":
			u := p.URL
			q.Kind, q.File = "file", &file03{Name: p.Filename, MimeType: p.MediaType, URI: &u}
		default:
			b := base64.StdEncoding.EncodeToString(p.Raw)
			q.Kind, q.File = "file", &file03{Name: p.Filename, MimeType: p.MediaType, Bytes: &b}
		}
		out.Parts = append(out.Parts, q)
	}
	return out
}

func (p part03) part(path string) (Part, error) {
	out := Part{Metadata: p.Metadata}
	switch p.Kind {
	case "text":
		if p.Text == nil || p.Data != nil || p.File != nil {
			return out, fmt.Errorf("%s: a text part must carry text only", path)
		}
		out.Text = p.Text
	case "data":
		if p.Data == nil || p.Text != nil || p.File != nil {
			return out, fmt.Errorf("%s: a data part must carry data only", path)
		}
		if p.Data.Kind() != '{' {
			return out, fmt.Errorf("%s.data: must be an object", path)
		}
		out.Data = json.RawMessage(p.Data.Clone())
	case "file":
		if p.File == nil || p.Text != nil || p.Data != nil || (p.File.Bytes == nil) == (p.File.URI == nil) {
			return out, fmt.Errorf("%s: a file part must carry file with exactly one of bytes, uri", path)
		}
		out.Filename, out.MediaType = p.File.Name, p.File.MimeType
		if p.File.URI != nil {
			if *p.File.URI == "" {
				return out, fmt.Errorf("%s.file.uri: empty", path)
			}
			out.URL = *p.File.URI
		} else {
			raw, err := decodeBase64(*p.File.Bytes)
			if err != nil {
				return out, fmt.Errorf("%s.file.bytes: %w", path, err)
			}
			out.Raw = raw
		}
	default:
		return out, fmt.Errorf("%s.kind: %q is not text, data or file", path, clip(p.Kind))
	}
	return out, nil
}

func (m *message03) message(path string) (*Message, error) {
	if m.Kind != "message" {
		return nil, fmt.Errorf("%s.kind: %q, want message", path, clip(m.Kind))
	}
	role, ok := roles03[m.Role]
	if !ok {
		return nil, fmt.Errorf("%s.role: %q is not user or agent", path, clip(m.Role))
	}
	if m.MessageID == "" {
		return nil, fmt.Errorf("%s.messageId: missing", path)
	}
	out := &Message{MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID, Role: role,
		Metadata: m.Metadata, ReferenceTaskIDs: m.ReferenceTaskIDs}
	ps, err := convParts03(m.Parts, path)
	out.Parts = ps
	return out, err
}

func convParts03(in parts03, path string) (Parts, error) {
	out := make(Parts, 0, len(in))
	for i, p := range in {
		q, err := p.part(fmt.Sprintf("%s.parts[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

func (t *task03) task() (*Task, error) {
	if t.Kind != "task" {
		return nil, fmt.Errorf("task.kind: %q, want task", clip(t.Kind))
	}
	if t.ID == "" {
		return nil, errors.New("task.id: missing")
	}
	state, ok := states03[t.Status.State]
	if !ok {
		return nil, fmt.Errorf("task.status.state: %q is not a known task state", clip(t.Status.State))
	}
	out := &Task{ID: t.ID, ContextID: t.ContextID, Metadata: t.Metadata,
		Status: TaskStatus{State: state, Timestamp: t.Status.Timestamp}}
	if t.Status.Message != nil {
		m, err := t.Status.Message.message("task.status.message")
		if err != nil {
			return nil, err
		}
		out.Status.Message = m
	}
	for i, a := range t.Artifacts {
		ps, err := convParts03(a.Parts, fmt.Sprintf("task.artifacts[%d]", i))
		if err != nil {
			return nil, err
		}
		out.Artifacts = append(out.Artifacts, Artifact{ArtifactID: a.ArtifactID, Name: a.Name,
			Description: a.Description, Parts: ps, Metadata: a.Metadata})
	}
	for i := range t.History {
		m, err := t.History[i].message(fmt.Sprintf("task.history[%d]", i))
		if err != nil {
			return nil, err
		}
		out.History = append(out.History, *m)
	}
	return out, nil
}

// DecodeSendResult03 decodes an A2A 0.3 message/send result: a Message
// (kind "message") or a Task (kind "task").
func DecodeSendResult03(b []byte) (*Message, *Task, error) {
	var probe struct {
		Kind string `json:"kind"`
	}
	if err := unmarshalStrict(b, &probe); err != nil {
		return nil, nil, fmt.Errorf("decode message/send result: %w", err)
	}
	switch probe.Kind {
	case "message":
		var m message03
		if err := unmarshalStrict(b, &m); err != nil {
			return nil, nil, fmt.Errorf("decode message/send result: %w", err)
		}
		out, err := m.message("message")
		if err != nil {
			return nil, nil, fmt.Errorf("decode message/send result: %w", err)
		}
		return out, nil, nil
	case "task":
		t, err := DecodeTask03(b)
		return nil, t, err
	}
	return nil, nil, fmt.Errorf("decode message/send result: kind %q is not message or task", clip(probe.Kind))
}

// DecodeTask03 decodes an A2A 0.3 Task (the tasks/get result).
func DecodeTask03(b []byte) (*Task, error) {
	var t task03
	if err := unmarshalStrict(b, &t); err != nil {
		return nil, fmt.Errorf("decode task: %w", err)
	}
	out, err := t.task()
	if err != nil {
		return nil, fmt.Errorf("decode task: %w", err)
	}
	return out, nil
}
