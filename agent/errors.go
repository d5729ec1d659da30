package agent

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Sentinel errors of the agent client. An *Error from an agent matches the
// sentinel of its kind with errors.Is, and ErrPermanent when retrying the
// same request cannot help.
var (
	// ErrUnknownAgent: no target of that name is configured.
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrPermanent marks an error that retrying cannot fix.
	ErrPermanent = errors.New("permanent agent error")

	ErrParse                  = errors.New("agent could not parse the request")
	ErrInvalidRequest         = errors.New("invalid request")
	ErrMethodNotFound         = errors.New("method not found")
	ErrInvalidParams          = errors.New("invalid parameters")
	ErrInternal               = errors.New("agent internal error")
	ErrTaskNotFound           = errors.New("task not found")
	ErrTaskNotCancelable      = errors.New("task not cancelable")
	ErrPushNotSupported       = errors.New("push notifications not supported")
	ErrUnsupportedOperation   = errors.New("unsupported operation")
	ErrContentTypeUnsupported = errors.New("content type not supported")
	ErrInvalidAgentResponse   = errors.New("invalid agent response")
	ErrExtendedCardMissing    = errors.New("extended agent card not configured")
	ErrExtensionRequired      = errors.New("extension support required")
	ErrVersionNotSupported    = errors.New("A2A version not supported")

	// ErrRedirect: the agent answered a redirect (any 3xx), which beachd
	// never follows — the request's headers (credentials, often) and body
	// are meant for the configured URL alone. A *RedirectError matches it,
	// and ErrPermanent: the same request to the same URL gets the same
	// answer until the configuration changes.
	ErrRedirect = errors.New("agent answered a redirect")
)

// errorKind is one row of the A2A error taxonomy: the JSON-RPC code, the
// google.rpc.ErrorInfo reason (HTTP+JSON and 1.0 JSON-RPC data), and
// whether a retry of the same request may succeed.
type errorKind struct {
	code      int
	reason    string
	sentinel  error
	permanent bool
}

var errorKinds = []errorKind{
	{-32700, "PARSE_ERROR", ErrParse, true},
	{-32600, "INVALID_REQUEST", ErrInvalidRequest, true},
	{-32601, "METHOD_NOT_FOUND", ErrMethodNotFound, true},
	{-32602, "INVALID_PARAMS", ErrInvalidParams, true},
	{-32603, "INTERNAL", ErrInternal, false},
	{-32001, "TASK_NOT_FOUND", ErrTaskNotFound, true},
	{-32002, "TASK_NOT_CANCELABLE", ErrTaskNotCancelable, true},
	{-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", ErrPushNotSupported, true},
	{-32004, "UNSUPPORTED_OPERATION", ErrUnsupportedOperation, true},
	{-32005, "CONTENT_TYPE_NOT_SUPPORTED", ErrContentTypeUnsupported, true},
	{-32006, "INVALID_AGENT_RESPONSE", ErrInvalidAgentResponse, false},
	{-32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", ErrExtendedCardMissing, true},
	{-32008, "EXTENSION_SUPPORT_REQUIRED", ErrExtensionRequired, true},
	{-32009, "VERSION_NOT_SUPPORTED", ErrVersionNotSupported, true},
}

// Error is an error the agent answered: a JSON-RPC error object, an
// HTTP+JSON error body, or an HTTP status without either.
type Error struct {
	Generation string // "1.0" or "0.3"
	Code       int    // the JSON-RPC error code; 0 when there was none
	Reason     string // the ErrorInfo reason, when the agent sent one
	Status     int    // the HTTP status, when it was not 200
	Message    string // the agent's text, clipped
}

func (e *Error) kind() (errorKind, bool) {
	for _, k := range errorKinds {
		if (e.Code != 0 && k.code == e.Code) || (e.Code == 0 && e.Reason != "" && k.reason == e.Reason) {
			return k, true
		}
	}
	return errorKind{}, false
}

// Permanent reports whether retrying the same request cannot help: a known
// permanent kind, or an HTTP 4xx other than 408, 409 and 429 with no
// error kind in the body. Unknown codes and 5xx are temporary.
func (e *Error) Permanent() bool {
	if k, ok := e.kind(); ok {
		return k.permanent
	}
	if e.Code != 0 {
		return false
	}
	return e.Status >= 400 && e.Status < 500 && e.Status != http.StatusRequestTimeout &&
		e.Status != http.StatusConflict && e.Status != http.StatusTooManyRequests
}

// Is matches the sentinel of the error's kind, and ErrPermanent.
func (e *Error) Is(target error) bool {
	if target == ErrPermanent {
		return e.Permanent()
	}
	k, ok := e.kind()
	return ok && k.sentinel == target
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent answered (A2A %s)", e.Generation)
	if e.Status != 0 && e.Status != http.StatusOK {
		fmt.Fprintf(&b, " HTTP %d", e.Status)
	}
	if k, ok := e.kind(); ok {
		fmt.Fprintf(&b, " %s", k.sentinel)
	}
	if e.Code != 0 {
		fmt.Fprintf(&b, " (code %d)", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// RedirectError is a 3xx answer of an agent: a failure, never followed.
type RedirectError struct {
	Status int    // the HTTP status
	To     string // the origin Location names (see fetch.RedirectTarget)
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("agent answered a redirect to %s (not followed): HTTP %d; set the agent's URL to the endpoint it serves",
		e.To, e.Status)
}

// Is matches ErrRedirect and ErrPermanent.
func (e *RedirectError) Is(target error) bool { return target == ErrRedirect || target == ErrPermanent }

// errorInfoReason finds the reason of the first google.rpc.ErrorInfo in a
// JSON-RPC error's data (1.0 sends an array of details) or an HTTP+JSON
// error's details. Anything else yields "".
func errorInfoReason(v jsontext.Value) string {
	if v == nil {
		return ""
	}
	var details []map[string]any
	if v.Kind() == '{' {
		var one map[string]any
		if jsonv2.Unmarshal(v, &one) != nil {
			return ""
		}
		details = []map[string]any{one}
	} else if v.Kind() != '[' || jsonv2.Unmarshal(v, &details) != nil {
		return ""
	}
	for _, d := range details {
		if t, _ := d["@type"].(string); t != "" && !strings.HasSuffix(t, "google.rpc.ErrorInfo") {
			continue
		}
		if r, _ := d["reason"].(string); r != "" {
			return clip(r)
		}
	}
	return ""
}

// restError is the HTTP+JSON error body: {"error": {code, status, message, details}}.
type restError struct {
	Error *struct {
		Code    int            `json:"code"`
		Status  string         `json:"status"`
		Message string         `json:"message"`
		Details jsontext.Value `json:"details"`
	} `json:"error"`
}

// DecodeRESTError turns an HTTP+JSON error answer into an *Error; a body
// that is not the error shape yields an error with the status only.
func DecodeRESTError(status int, body []byte) *Error {
	e := &Error{Generation: "1.0", Status: status}
	var r restError
	if unmarshalStrict(body, &r) == nil && r.Error != nil {
		e.Message = clip(r.Error.Message)
		e.Reason = errorInfoReason(r.Error.Details)
	}
	return e
}
