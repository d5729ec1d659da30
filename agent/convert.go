package agent

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/cool-ai/beachd/envelope"
)

// MessageEnvelope converts an agent's reply message into a settled envelope.
func MessageEnvelope(m *a2a.Message, finalized string, now time.Time) *envelope.Envelope {
	env := &envelope.Envelope{
		Role: "agent",
		Meta: envelope.Meta{SessionID: m.ContextID, TurnID: string(m.TaskID), ProducedAt: now.UTC(), FinalizedBy: finalized},
	}
	env.Parts = appendParts(env.Parts, m.Parts)
	if env.Meta.TurnID == "" {
		env.Meta.TurnID = m.ID
	}
	return env
}

// TaskEnvelope converts a settled task into an envelope: the artifacts'
// parts in order, then the parts of the final status message. When neither
// holds a part, the agent messages of the history since the last user
// message are used.
func TaskEnvelope(t *a2a.Task, now time.Time) *envelope.Envelope {
	env := &envelope.Envelope{
		Role: "agent",
		Meta: envelope.Meta{SessionID: t.ContextID, TurnID: string(t.ID), ProducedAt: now.UTC(),
			FinalizedBy: finalizedBy(t.Status.State)},
	}
	for _, a := range t.Artifacts {
		if a != nil {
			env.Parts = appendParts(env.Parts, a.Parts)
		}
	}
	if t.Status.Message != nil {
		env.Parts = appendParts(env.Parts, t.Status.Message.Parts)
	}
	if len(env.Parts) == 0 {
		start := 0
		for i, m := range t.History {
			if m != nil && m.Role == a2a.MessageRoleUser {
				start = i + 1
			}
		}
		for _, m := range t.History[start:] {
			if m != nil && m.Role == a2a.MessageRoleAgent {
				env.Parts = appendParts(env.Parts, m.Parts)
			}
		}
	}
	if env.Parts == nil {
		env.Parts = []envelope.Part{}
	}
	return env
}

// appendParts converts A2A parts, keeping Beach partType metadata. A part
// without a partType becomes "response" (text) or "domain-data" (data); a
// file part becomes an "artifact" data part.
func appendParts(out []envelope.Part, parts a2a.ContentParts) []envelope.Part {
	for _, p := range parts {
		switch v := p.(type) {
		case a2a.TextPart:
			txt := v.Text
			out = append(out, envelope.Part{Text: &txt, Metadata: withPartType(v.Metadata, envelope.PartResponse)})
		case *a2a.TextPart:
			txt := v.Text
			out = append(out, envelope.Part{Text: &txt, Metadata: withPartType(v.Metadata, envelope.PartResponse)})
		case a2a.DataPart:
			out = appendData(out, v.Data, v.Metadata)
		case *a2a.DataPart:
			out = appendData(out, v.Data, v.Metadata)
		case a2a.FilePart:
			out = appendFile(out, v)
		case *a2a.FilePart:
			out = appendFile(out, *v)
		}
	}
	return out
}

func appendData(out []envelope.Part, data, meta map[string]any) []envelope.Part {
	b, err := json.Marshal(data)
	if err != nil || data == nil {
		b = []byte("{}")
	}
	return append(out, envelope.Part{Data: b, Metadata: withPartType(meta, envelope.PartDomainData)})
}

func appendFile(out []envelope.Part, f a2a.FilePart) []envelope.Part {
	art := envelope.Artifact{}
	switch c := f.File.(type) {
	case a2a.FileURI:
		art = envelope.Artifact{ArtifactID: c.Name, MimeType: c.MimeType, Name: c.Name, URI: c.URI}
	case a2a.FileBytes:
		raw, _ := base64.StdEncoding.DecodeString(c.Bytes)
		art = envelope.Artifact{ArtifactID: c.Name, MimeType: c.MimeType, Name: c.Name, Bytes: raw, SizeBytes: int64(len(raw))}
	default:
		return out
	}
	if art.ArtifactID == "" {
		art.ArtifactID = "file"
	}
	if art.MimeType == "" {
		art.MimeType = "application/octet-stream"
	}
	b, _ := json.Marshal(art)
	return append(out, envelope.Part{Data: b, Metadata: withPartType(f.Metadata, envelope.PartArtifact)})
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
