package agent

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// MessageEnvelope converts an agent's reply message into a settled envelope.
func MessageEnvelope(m *Message, finalized string, now time.Time) *envelope.Envelope {
	env := &envelope.Envelope{
		Role: "agent",
		Meta: envelope.Meta{SessionID: m.ContextID, TurnID: m.TaskID, ProducedAt: now.UTC(), FinalizedBy: finalized},
	}
	env.Parts = appendParts(env.Parts, m.Parts)
	if env.Meta.TurnID == "" {
		env.Meta.TurnID = m.MessageID
	}
	if env.Parts == nil {
		env.Parts = []envelope.Part{}
	}
	return env
}

// TaskEnvelope converts a settled task into an envelope: the artifacts'
// parts in order, then the parts of the final status message. When neither
// holds a part, the agent messages of the history since the last user
// message are used.
func TaskEnvelope(t *Task, now time.Time) *envelope.Envelope {
	env := &envelope.Envelope{
		Role: "agent",
		Meta: envelope.Meta{SessionID: t.ContextID, TurnID: t.ID, ProducedAt: now.UTC(),
			FinalizedBy: finalizedBy(t.Status.State)},
	}
	for _, a := range t.Artifacts {
		env.Parts = appendParts(env.Parts, a.Parts)
	}
	if t.Status.Message != nil {
		env.Parts = appendParts(env.Parts, t.Status.Message.Parts)
	}
	if len(env.Parts) == 0 {
		start := 0
		for i, m := range t.History {
			if m.Role == RoleUser {
				start = i + 1
			}
		}
		for _, m := range t.History[start:] {
			if m.Role == RoleAgent {
				env.Parts = appendParts(env.Parts, m.Parts)
			}
		}
	}
	if env.Parts == nil {
		env.Parts = []envelope.Part{}
	}
	return env
}

// finalizedBy maps a task state to the Beach turn state that settled it.
func finalizedBy(s TaskState) string {
	switch s {
	case StateCompleted:
		return "complete"
	case StateInputRequired, StateAuthRequired:
		return "suspended"
	}
	return "error"
}

// appendParts converts A2A parts, keeping Beach partType metadata. A part
// without a partType becomes "response" (text) or "domain-data" (data); a
// file (raw or url) becomes an "artifact" data part. Data that is not an
// object is wrapped as {"value": …}.
func appendParts(out []envelope.Part, parts Parts) []envelope.Part {
	for _, p := range parts {
		switch {
		case p.Text != nil:
			txt := *p.Text
			out = append(out, envelope.Part{Text: &txt, Metadata: withPartType(p.Metadata, envelope.PartResponse)})
		case p.Data != nil:
			data := []byte(p.Data)
			if firstByte(data) != '{' {
				data, _ = json.Marshal(map[string]json.RawMessage{"value": p.Data})
			}
			out = append(out, envelope.Part{Data: data, Metadata: withPartType(p.Metadata, envelope.PartDomainData)})
		default:
			out = append(out, filePart(p))
		}
	}
	return out
}

func filePart(p Part) envelope.Part {
	art := envelope.Artifact{ArtifactID: p.Filename, MimeType: p.MediaType, Name: p.Filename}
	if p.URL != "" {
		art.URI = p.URL
	} else {
		art.Bytes, art.SizeBytes = p.Raw, int64(len(p.Raw))
	}
	if art.ArtifactID == "" {
		art.ArtifactID = "file"
	}
	if art.MimeType == "" {
		art.MimeType = "application/octet-stream"
	}
	b, _ := json.Marshal(art)
	return envelope.Part{Data: b, Metadata: withPartType(p.Metadata, envelope.PartArtifact)}
}

func withPartType(meta map[string]any, def string) map[string]any {
	m := maps.Clone(meta)
	if m == nil {
		m = map[string]any{}
	}
	if s, _ := m["partType"].(string); s == "" {
		m["partType"] = def
	}
	return m
}
