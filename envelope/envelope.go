package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Canonical part types (docs/envelope.md).
const (
	PartAck              = "ack"
	PartThinking         = "thinking"
	PartProgress         = "progress"
	PartResponse         = "response"
	PartClarify          = "clarify"
	PartError            = "error"
	PartDomainData       = "domain-data"
	PartLLMContext       = "llm-context"
	PartA2UISurface      = "a2ui-surface"
	PartArtifact         = "artifact"
	PartReasoningTrace   = "reasoning-trace"
	PartCitation         = "citation"
	PartApprovalRequest  = "approval-request"
	PartApprovalResponse = "approval-response"
	PartSetState         = "setState"
)

// Envelope is a settled Beach response envelope: an A2A message (role, parts)
// plus Beach's meta block. The optional A2A fields are kept so that an A2A
// message can be posted as it is.
type Envelope struct {
	Kind      string         `json:"kind,omitempty"`
	MessageID string         `json:"messageId,omitempty"`
	ContextID string         `json:"contextId,omitempty"`
	TaskID    string         `json:"taskId,omitempty"`
	Role      string         `json:"role"`
	Parts     Parts          `json:"parts"`
	Meta      Meta           `json:"meta"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Meta is Beach's correlation block.
type Meta struct {
	SessionID   string    `json:"sessionId"`
	TurnID      string    `json:"turnId"`
	ProducedAt  time.Time `json:"producedAt"`
	FinalizedBy string    `json:"finalizedBy"`
}

// Part is one A2A part: text or data, with metadata carrying the partType.
// Data is kept as raw JSON so that what a peer sent is what a webhook gets.
type Part struct {
	Kind     string          `json:"kind,omitempty"`
	Text     *string         `json:"text,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	Metadata map[string]any  `json:"metadata"`
}

// PartType returns metadata.partType, or "" when it is missing or not a string.
func (p Part) PartType() string {
	s, _ := p.Metadata["partType"].(string)
	return s
}

// TextValue returns the part's text, or "" for a data part.
func (p Part) TextValue() string {
	if p.Text == nil {
		return ""
	}
	return *p.Text
}

// IsData reports whether the part carries data.
func (p Part) IsData() bool { return len(p.Data) > 0 }

// DataObject decodes the part's data as a JSON object, numbers kept as
// json.Number so that nothing is rounded.
func (p Part) DataObject() (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(p.Data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode part data: %w", err)
	}
	if m == nil {
		return nil, errors.New("decode part data: not an object")
	}
	return m, nil
}

// DecodeData decodes the part's data into v. Member names match exactly,
// as the schema checks (validateApprovalRequest, validateArtifact) read
// them: a "toolname" beside "toolName" is ignored, not taken for it.
func (p Part) DecodeData(v any) error {
	if len(p.Data) == 0 {
		return errors.New("part has no data")
	}
	return jsonv2.Unmarshal(p.Data, v, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// Text returns the concatenated text of the parts of the given type, in
// order, separated by blank lines.
func (e *Envelope) Text(partType string) string {
	var b []byte
	for _, p := range e.Parts {
		if p.PartType() != partType || p.Text == nil {
			continue
		}
		if len(b) > 0 {
			b = append(b, "\n\n"...)
		}
		b = append(b, *p.Text...)
	}
	return string(b)
}

// PartsOf returns the parts of the given type, in order.
func (e *Envelope) PartsOf(partType string) []Part {
	var out []Part
	for _, p := range e.Parts {
		if p.PartType() == partType {
			out = append(out, p)
		}
	}
	return out
}

// Limits bound what Decode accepts. The zero value means the defaults.
type Limits struct {
	MaxBytes int64 // whole document; default 8 MiB
	MaxParts int   // default 256
}

// DefaultLimits are the default input bounds (limits in docs/configuration.md).
var DefaultLimits = Limits{MaxBytes: 8 << 20, MaxParts: 256}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxParts <= 0 {
		l.MaxParts = DefaultLimits.MaxParts
	}
	return l
}

// TooLargeError reports a document over Limits.MaxBytes.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("envelope larger than %d bytes", e.Limit)
}

// ReadLimited reads all of r, failing with *TooLargeError past limit bytes.
func ReadLimited(r io.Reader, limit int64) ([]byte, error) {
	return ReadLimitedSize(r, limit, -1)
}

// FirstPiece is the most ReadLimitedSize reserves before any byte has
// arrived, whatever the announced length: a client that announces 8 MiB and
// sends slowly holds 64 KiB, not 8 MiB.
const FirstPiece = 64 << 10

// ReadLimitedSize is ReadLimited for a body whose announced length is size
// (an HTTP Content-Length; -1 when unknown). The announcement is only a
// hint — what is read, and the limit, decide — and it is trusted only as far
// as bytes back it: the buffer starts at the announced size up to
// FirstPiece, then grows to at most four times what has arrived each time it
// fills, never past the announced size. An ordinary body is read into one
// buffer of its own size, a large one costs a copy or two, and the memory a
// body holds stays within four times what it sent.
func ReadLimitedSize(r io.Reader, limit, size int64) ([]byte, error) {
	if size <= 0 || size > limit {
		size = -1
	}
	// Room for the body and a last read that sees the end (or one byte past
	// the limit), so that a body of exactly the announced size needs no
	// second buffer.
	first := int64(bytes.MinRead)
	if size > 0 {
		first = min(size, FirstPiece) + bytes.MinRead
	}
	buf := make([]byte, 0, first)
	r = io.LimitReader(r, limit+1)
	for {
		if cap(buf)-len(buf) < bytes.MinRead {
			want := 4 * int64(cap(buf))
			if size > 0 && int64(len(buf)) < size {
				want = min(want, size+bytes.MinRead)
			}
			want = min(want, limit+1+bytes.MinRead)
			next := make([]byte, len(buf), max(want, int64(len(buf))+bytes.MinRead))
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &TooLargeError{Limit: limit}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Decode parses one envelope from b. It checks the JSON shape only (unknown
// fields, trailing data, size, part count); Validate checks the meaning.
// Syntax errors come back as a *ValidationError with the byte offset.
func Decode(b []byte, lim Limits) (*Envelope, error) {
	lim = lim.withDefaults()
	if int64(len(b)) > lim.MaxBytes {
		return nil, &TooLargeError{Limit: lim.MaxBytes}
	}
	var env Envelope
	if err := StrictUnmarshal(b, &env); err != nil {
		return nil, &ValidationError{Problems: []Problem{ProblemOf("", err)}}
	}
	if len(env.Parts) > lim.MaxParts {
		return nil, &ValidationError{Problems: []Problem{{Path: "parts",
			Reason: fmt.Sprintf("%d parts; at most %d are allowed", len(env.Parts), lim.MaxParts)}}}
	}
	return &env, nil
}

// StrictUnmarshal decodes b into v, refusing unknown fields, duplicate
// member names, invalid UTF-8 and trailing data, and describing errors with
// their place. Member names match the struct tags exactly (case-sensitive).
// It decodes with the JSON v2 implementation (go-json-experiment/json): on
// the ingest path it costs less than half of encoding/json's Decoder.
func StrictUnmarshal(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("empty body: expected a JSON object")
	}
	if err := jsonv2.Unmarshal(b, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return describeJSONError(err)
	}
	return nil
}

// UnmarshalStored decodes an envelope beachd stored: it was checked at
// ingest, so unknown members are ignored, and so are duplicate names and
// invalid UTF-8 that an older, laxer beachd may have accepted.
func UnmarshalStored(b []byte, env *Envelope) error {
	return jsonv2.Unmarshal(b, env, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

func describeJSONError(err error) error {
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &syn):
		if errors.Is(syn.Err, io.ErrUnexpectedEOF) {
			return errors.New("malformed JSON: unexpected end of input")
		}
		if strings.Contains(syn.Err.Error(), "after top-level value") {
			return errors.New("unexpected data after the JSON document")
		}
		if syn.JSONPointer != "" {
			return fmt.Errorf("malformed JSON at byte %d (%s): %v", syn.ByteOffset, pointerPath(syn.JSONPointer), syn.Err)
		}
		return fmt.Errorf("malformed JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	case errors.As(err, &sem):
		field := problemPath(sem.JSONPointer)
		if errors.Is(sem.Err, jsonv2.ErrUnknownName) {
			if field == "" {
				return fmt.Errorf("unknown field %q", sem.JSONPointer.LastToken())
			}
			return &FieldError{Path: field, Reason: unknownField(sem.GoType, sem.JSONPointer.LastToken())}
		}
		if field == "" {
			field = "document"
		}
		if sem.GoType != nil && sem.JSONKind != 0 {
			msg := fmt.Sprintf("expected %s, got JSON %s", sem.GoType, kindName(sem.JSONKind))
			if sem.Err != nil {
				msg += ": " + sem.Err.Error()
			}
			return &FieldError{Path: field, Reason: msg}
		}
		if sem.Err != nil {
			return &FieldError{Path: field, Reason: sem.Err.Error()}
		}
		return &FieldError{Path: field, Reason: sem.Error()}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("malformed JSON: unexpected end of input")
	}
	return fmt.Errorf("malformed JSON: %v", err)
}

// pointerPath turns a JSON pointer into the dotted path problems use.
func pointerPath(p jsontext.Pointer) string {
	if p == "" {
		return "document"
	}
	return strings.TrimPrefix(strings.ReplaceAll(string(p), "/", "."), ".")
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return k.String()
}

// Clone returns a deep copy made through JSON.
func (e *Envelope) Clone() *Envelope {
	b, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("envelope: marshal own value: %v", err))
	}
	var c Envelope
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("envelope: unmarshal own value: %v", err))
	}
	return &c
}
