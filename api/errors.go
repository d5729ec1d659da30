package api

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Sentinel errors of the api package.
var (
	// ErrUnauthorized: no or a wrong bearer key.
	ErrUnauthorized = errors.New("missing or invalid API key")
	// ErrReadOnly: a read-only key asked to change something.
	ErrReadOnly = errors.New("this API key is read-only")
	// ErrUnsupportedMediaType: a request body that is not JSON by its
	// Content-Type (or is compressed): 415.
	ErrUnsupportedMediaType = errors.New("the body must be JSON: Content-Type application/json (charset utf-8, if given), without Content-Encoding")
)

// ConflictError is a request that conflicts with what is stored (an
// approvalId already used): 409, with the problems naming the paths.
type ConflictError struct {
	Problems []envelope.Problem
	Err      error
}

func (e *ConflictError) Error() string {
	if len(e.Problems) == 0 {
		return e.Err.Error()
	}
	return e.Problems[0].Path + ": " + e.Problems[0].Reason
}

func (e *ConflictError) Unwrap() error { return e.Err }

// UnprocessableError is a well-formed request that names something that
// cannot be used (an unknown conversation): 422, with the problems naming
// the paths.
type UnprocessableError struct {
	Problems []envelope.Problem
}

func (e *UnprocessableError) Error() string {
	if len(e.Problems) == 0 {
		return "unprocessable request"
	}
	return e.Problems[0].Path + ": " + e.Problems[0].Reason
}

type errorBody struct {
	Error    string             `json:"error"`
	Problems []envelope.Problem `json:"problems,omitempty"`
}

// WriteJSON writes v as JSON with the status, indented by two spaces and
// ending in a newline. Its encoder (and the encoder's buffer for the
// indented form) is taken from a pool: every ingest's 202 is one, and a
// new encoder each time was most of what writing it allocated.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	a := answerEncoders.Get().(*answerEncoder)
	a.w = w
	err := a.enc.Encode(v)
	a.w = nil
	if err == nil {
		// An Encoder keeps a failed write's error and refuses every
		// value after it: one that failed is not used again.
		answerEncoders.Put(a)
	}
}

// answerEncoder is an indenting encoder whose writer is set for each
// answer.
type answerEncoder struct {
	enc *json.Encoder
	w   io.Writer
}

func (a *answerEncoder) Write(b []byte) (int, error) { return a.w.Write(b) }

var answerEncoders = sync.Pool{New: func() any {
	a := new(answerEncoder)
	a.enc = json.NewEncoder(a)
	a.enc.SetIndent("", "  ")
	return a
}}

// WriteError maps err to a status and a JSON body. It is the only place
// errors become HTTP responses; unknown errors are logged and answered 500
// without their text.
func WriteError(w http.ResponseWriter, log *slog.Logger, err error) {
	status, body := errorResponse(err)
	switch status {
	case http.StatusUnsupportedMediaType:
		w.Header().Set("Accept-Encoding", "identity")
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="beachd"`)
	case http.StatusInternalServerError:
		if log != nil {
			log.Error("request failed", "err", err)
		}
	}
	WriteJSON(w, status, body)
}

// DescribeError is what WriteError would answer for err: the status, the
// error's text and the problems naming what is wrong. Surfaces other than
// HTTP (the MCP tools) tell their callers the same.
func DescribeError(err error) (status int, message string, problems []envelope.Problem) {
	status, body := errorResponse(err)
	return status, body.Error, body.Problems
}

// errorResponse maps err to a status and a body; unknown errors are 500
// without their text.
func errorResponse(err error) (int, errorBody) {
	var verr *envelope.ValidationError
	var tooLarge *envelope.TooLargeError
	var conflict *ConflictError
	var unprocessable *UnprocessableError
	switch {
	case errors.As(err, &unprocessable):
		return http.StatusUnprocessableEntity, errorBody{Error: "unprocessable request", Problems: unprocessable.Problems}
	case errors.Is(err, ErrBadSignature):
		return http.StatusForbidden, errorBody{Error: err.Error()}
	case errors.As(err, &conflict):
		return http.StatusConflict, errorBody{Error: "conflict", Problems: conflict.Problems}
	case errors.As(err, &verr):
		return http.StatusBadRequest, errorBody{Error: "invalid request", Problems: verr.Problems}
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, errorBody{Error: tooLarge.Error()}
	case errors.Is(err, ErrUnsupportedMediaType):
		return http.StatusUnsupportedMediaType, errorBody{Error: err.Error()}
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized, errorBody{Error: err.Error()}
	case errors.Is(err, ErrReadOnly):
		return http.StatusForbidden, errorBody{Error: err.Error()}
	case errors.Is(err, store.ErrIdempotencyConflict):
		return http.StatusConflict, errorBody{Error: "Idempotency-Key was already used with a different request body"}
	case errors.Is(err, store.ErrDuplicateApproval):
		return http.StatusConflict, errorBody{Error: "an approval with this approvalId already exists"}
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, errorBody{Error: "not found"}
	case errors.Is(err, store.ErrBadState):
		return http.StatusConflict, errorBody{Error: err.Error()}
	}
	return http.StatusInternalServerError, errorBody{Error: "internal error"}
}
