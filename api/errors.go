package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

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

// WriteJSON writes v as JSON with the status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// WriteError maps err to a status and a JSON body. It is the only place
// errors become HTTP responses; unknown errors are logged and answered 500
// without their text.
func WriteError(w http.ResponseWriter, log *slog.Logger, err error) {
	var verr *envelope.ValidationError
	var tooLarge *envelope.TooLargeError
	var conflict *ConflictError
	var unprocessable *UnprocessableError
	switch {
	case errors.As(err, &unprocessable):
		WriteJSON(w, http.StatusUnprocessableEntity, errorBody{Error: "unprocessable request", Problems: unprocessable.Problems})
	case errors.Is(err, ErrBadSignature):
		WriteJSON(w, http.StatusForbidden, errorBody{Error: err.Error()})
	case errors.As(err, &conflict):
		WriteJSON(w, http.StatusConflict, errorBody{Error: "conflict", Problems: conflict.Problems})
	case errors.As(err, &verr):
		WriteJSON(w, http.StatusBadRequest, errorBody{Error: "invalid request", Problems: verr.Problems})
	case errors.As(err, &tooLarge):
		WriteJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: tooLarge.Error()})
	case errors.Is(err, ErrUnsupportedMediaType):
		w.Header().Set("Accept-Encoding", "identity")
		WriteJSON(w, http.StatusUnsupportedMediaType, errorBody{Error: err.Error()})
	case errors.Is(err, ErrUnauthorized):
		w.Header().Set("WWW-Authenticate", `Bearer realm="beachd"`)
		WriteJSON(w, http.StatusUnauthorized, errorBody{Error: err.Error()})
	case errors.Is(err, ErrReadOnly):
		WriteJSON(w, http.StatusForbidden, errorBody{Error: err.Error()})
	case errors.Is(err, store.ErrIdempotencyConflict):
		WriteJSON(w, http.StatusConflict, errorBody{Error: "Idempotency-Key was already used with a different request body"})
	case errors.Is(err, store.ErrDuplicateApproval):
		WriteJSON(w, http.StatusConflict, errorBody{Error: "an approval with this approvalId already exists"})
	case errors.Is(err, store.ErrNotFound):
		WriteJSON(w, http.StatusNotFound, errorBody{Error: "not found"})
	case errors.Is(err, store.ErrBadState):
		WriteJSON(w, http.StatusConflict, errorBody{Error: err.Error()})
	default:
		if log != nil {
			log.Error("request failed", "err", err)
		}
		WriteJSON(w, http.StatusInternalServerError, errorBody{Error: "internal error"})
	}
}
