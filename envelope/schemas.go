package envelope

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// ApprovalRequest is the data of an approval-request part.
type ApprovalRequest struct {
	ApprovalID string         `json:"approvalId"`
	ToolName   string         `json:"toolName"`
	ToolCallID string         `json:"toolCallId"`
	Args       map[string]any `json:"args"`
	Handler    string         `json:"handler"`
	Turn       string         `json:"turn"`
	Session    string         `json:"session"`
	ExpiresAt  *time.Time     `json:"expiresAt,omitempty"`
	// Summary is an optional human sentence ("Book BA2043 for 6 people");
	// renderers fall back to the tool name and arguments.
	Summary string `json:"summary,omitempty"`
}

// Decisions of an approval-response.
const (
	DecisionGranted = "granted"
	DecisionDenied  = "denied"
)

// ApprovalResponse is the data of an approval-response part (inbound only).
type ApprovalResponse struct {
	ApprovalID string    `json:"approvalId"`
	Decision   string    `json:"decision"`
	Reason     string    `json:"reason,omitempty"`
	DecidedBy  string    `json:"decidedBy,omitempty"`
	DecidedAt  time.Time `json:"decidedAt"`
}

// Artifact is the data of an artifact part: a reference by URI, or inline
// bytes (base64 in JSON).
type Artifact struct {
	ArtifactID string `json:"artifactId"`
	MimeType   string `json:"mimeType"`
	SizeBytes  int64  `json:"sizeBytes,omitempty"`
	Name       string `json:"name,omitempty"`
	URI        string `json:"uri,omitempty"`
	Bytes      []byte `json:"bytes,omitempty"`
}

// Merge strategies for domain-data slots.
var MergeStrategies = []string{"replace", "append", "deep-merge"}

// ApprovalRequests decodes every approval-request part of env, in order.
func (e *Envelope) ApprovalRequests() ([]ApprovalRequest, error) {
	var out []ApprovalRequest
	for i, p := range e.Parts {
		if p.PartType() != PartApprovalRequest {
			continue
		}
		var ar ApprovalRequest
		if err := p.DecodeData(&ar); err != nil {
			return nil, fmt.Errorf("parts[%d]: approval-request: %w", i, err)
		}
		out = append(out, ar)
	}
	return out, nil
}

func validateApprovalRequest(path string, data json.RawMessage, add func(string, string, ...any)) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		add(path, "approval-request data must be an object")
		return
	}
	for _, f := range []string{"approvalId", "toolName", "toolCallId", "handler", "turn", "session"} {
		v, ok := raw[f]
		if !ok {
			add(path+"."+f, "required")
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil || strings.TrimSpace(s) == "" {
			add(path+"."+f, "must be a non-empty string")
		} else if len(s) > 256 {
			add(path+"."+f, "longer than 256 characters")
		}
	}
	if v, ok := raw["args"]; !ok {
		add(path+".args", "required")
	} else {
		var m map[string]any
		if json.Unmarshal(v, &m) != nil || m == nil {
			add(path+".args", "must be an object")
		}
	}
	if v, ok := raw["expiresAt"]; ok {
		var s string
		if json.Unmarshal(v, &s) != nil {
			add(path+".expiresAt", "must be an RFC 3339 date-time string")
		} else if _, err := time.Parse(time.RFC3339, s); err != nil {
			add(path+".expiresAt", "must be an RFC 3339 date-time: %v", err)
		}
	}
}

func validateArtifact(path string, data json.RawMessage, add func(string, string, ...any)) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		add(path, "artifact data must be an object")
		return
	}
	str := func(f string) (string, bool) {
		v, ok := raw[f]
		if !ok {
			return "", false
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			add(path+"."+f, "must be a string")
			return "", false
		}
		return s, true
	}
	if s, ok := str("artifactId"); !ok || s == "" {
		add(path+".artifactId", "required")
	}
	if s, ok := str("mimeType"); !ok || s == "" {
		add(path+".mimeType", "required, a MIME type such as application/pdf")
	} else if why := checkMediaType(s); why != "" {
		add(path+".mimeType", "%s", why)
	}
	u, hasURI := str("uri")
	b64, hasBytes := str("bytes")
	switch {
	case hasURI && hasBytes:
		add(path, "give either uri or bytes, not both")
	case !hasURI && !hasBytes:
		add(path, "needs a uri or inline bytes")
	case hasURI:
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
			add(path+".uri", "must be an absolute http(s) URL")
		} else if pu.User != nil {
			// Never sent on (as Basic auth) nor shown to a recipient.
			add(path+".uri", "must not carry user-info (user:password@)")
		}
	case hasBytes:
		if _, err := base64.StdEncoding.DecodeString(b64); err != nil {
			add(path+".bytes", "must be standard base64")
		}
	}
	if v, ok := raw["sizeBytes"]; ok {
		var n int64
		if json.Unmarshal(v, &n) != nil || n < 0 {
			add(path+".sizeBytes", "must be a non-negative integer")
		}
	}
}
