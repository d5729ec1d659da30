package envelope

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with an input, located by a JSON path.
type Problem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ValidationError lists every problem found. It is what Decode and Validate
// return for bad input; callers answer it with 400 and the list.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Path == "" {
			parts[i] = p.Reason
		} else {
			parts[i] = p.Path + ": " + p.Reason
		}
	}
	return "invalid envelope: " + strings.Join(parts, "; ")
}

// Validate checks env against the registry: role, parts, part types, the
// schemas of the typed parts, meta. It returns nil or a *ValidationError
// listing every problem.
func (r *Registry) Validate(env *Envelope) error {
	var probs []Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, Problem{Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	if env.Role != "agent" {
		add("role", "must be \"agent\", got %q", env.Role)
	}
	if env.Kind != "" && env.Kind != "message" {
		add("kind", "must be \"message\" when present, got %q", env.Kind)
	}
	if len(env.Parts) == 0 {
		add("parts", "at least one part is required")
	}
	for i, p := range env.Parts {
		path := fmt.Sprintf("parts[%d]", i)
		r.validatePart(path, p, add)
	}
	m := env.Meta
	if strings.TrimSpace(m.SessionID) == "" {
		add("meta.sessionId", "required")
	}
	if strings.TrimSpace(m.TurnID) == "" {
		add("meta.turnId", "required")
	}
	if m.ProducedAt.IsZero() {
		add("meta.producedAt", "required, an RFC 3339 date-time")
	}
	if m.FinalizedBy == "" {
		add("meta.finalizedBy", "required: the turn state that settled the envelope")
	} else if ts, ok := r.states[m.FinalizedBy]; !ok {
		add("meta.finalizedBy", "unknown turn state %q", m.FinalizedBy)
	} else if !ts.Settles() {
		add("meta.finalizedBy", "turn state %q does not settle an envelope; buffered channels take settled envelopes only", m.FinalizedBy)
	}
	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	return nil
}

func (r *Registry) validatePart(path string, p Part, add func(string, string, ...any)) {
	hasText, hasData := p.Text != nil, len(p.Data) > 0 && string(p.Data) != "null"
	switch {
	case hasText && hasData:
		add(path, "a part carries text or data, not both")
	case !hasText && !hasData:
		add(path, "a part needs text or data")
	}
	switch p.Kind {
	case "":
	case "text":
		if !hasText {
			add(path+".kind", "kind \"text\" but the part has no text")
		}
	case "data":
		if !hasData {
			add(path+".kind", "kind \"data\" but the part has no data")
		}
	default:
		add(path+".kind", "must be \"text\" or \"data\", got %q", p.Kind)
	}
	if hasData {
		if b := strings.TrimSpace(string(p.Data)); !strings.HasPrefix(b, "{") && !strings.HasPrefix(b, "[") {
			add(path+".data", "must be a JSON object or array")
		}
	}
	pt := p.PartType()
	if p.Metadata == nil {
		add(path+".metadata", "required, with a partType")
		return
	}
	if _, isString := p.Metadata["partType"].(string); !isString {
		add(path+".metadata.partType", "required, a string")
		return
	}
	def, ok := r.parts[pt]
	if !ok {
		add(path+".metadata.partType", "unknown part type %q (register consumer types under part_types in the config)", pt)
		return
	}
	if def.InboundOnly {
		add(path+".metadata.partType", "%q is inbound only; beachd creates it from a decision and never sends it", pt)
		return
	}
	switch pt {
	case PartApprovalRequest:
		if !hasData {
			add(path+".data", "approval-request needs data")
		} else {
			validateApprovalRequest(path+".data", p.Data, add)
		}
	case PartArtifact:
		if !hasData {
			add(path+".data", "artifact needs data")
		} else {
			validateArtifact(path+".data", p.Data, add)
		}
	case PartDomainData:
		if v, ok := p.Metadata["slotKey"]; ok {
			if s, isStr := v.(string); !isStr || s == "" {
				add(path+".metadata.slotKey", "must be a non-empty string")
			}
		}
		if v, ok := p.Metadata["mergeStrategy"]; ok {
			if s, isStr := v.(string); !isStr || !slices.Contains(MergeStrategies, s) {
				add(path+".metadata.mergeStrategy", "must be one of %s", strings.Join(MergeStrategies, ", "))
			}
		}
	case PartA2UISurface:
		if !hasData {
			add(path+".data", "a2ui-surface needs data")
		} else if !looksLikeSurface(p.Data) {
			add(path+".data", "an A2UI surface is an object or a list of messages with createSurface, updateComponents or updateDataModel")
		}
	case PartResponse, PartClarify, PartError, PartLLMContext:
		if !hasText {
			add(path+".text", "%s parts carry text", pt)
		}
	}
}

func looksLikeSurface(b json.RawMessage) bool {
	has := func(m map[string]json.RawMessage) bool {
		_, a := m["createSurface"]
		_, c := m["updateComponents"]
		_, d := m["updateDataModel"]
		_, e := m["deleteSurface"]
		return a || c || d || e
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) == nil {
		if has(obj) {
			return true
		}
		if msgs, ok := obj["messages"]; ok {
			b = msgs
		}
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(b, &list) != nil || len(list) == 0 {
		return false
	}
	for _, m := range list {
		if !has(m) {
			return false
		}
	}
	return true
}
