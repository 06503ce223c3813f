// Package openai is the router's OpenAI wire surface: the error shape
// ({"error":{"message","type","param","code"}}) and its constructors (the
// context-length refusal, the answer to an unrouted request), validation
// of a completion request body, the /v1/models cards, and the assembler
// that folds a decode stream into one non-streamed response. It knows OpenAI's and
// vLLM's JSON, not the router's state: callers pass in what it needs.
package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// Error types are OpenAI's (docs/router.md, "Errors"): what kind of
// failure it is and so what a client should do. narwhal's own reason goes
// in code.
const (
	// TypeInvalid: the client's request cannot succeed as sent (400, 404,
	// 405, 408, 413, and an engine's own 4xx). Do not retry it unchanged.
	TypeInvalid = "invalid_request_error"
	// TypeRateLimit: the router is at a limit right now (429 with
	// Retry-After). Retry later.
	TypeRateLimit = "rate_limit_error"
	// TypeUnavailable: this router cannot place work (503 with
	// Retry-After): standby, fenced, held, shutting down, no engine.
	TypeUnavailable = "service_unavailable_error"
	// TypeServer: an engine or router fault (500, 502, 504).
	TypeServer = "server_error"
)

// Error is an OpenAI-shaped error body and the status that goes with it.
type Error struct {
	Status     int
	Message    string
	Type       string
	Code       *string // null when nil
	Param      *string // null when nil
	RetryAfter int     // seconds; 0 sends no Retry-After
}

func strp(s string) *string { return &s }

// errorBody is the JSON OpenAI's SDKs parse: every key always present.
type errorBody struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ShouldRetryHeader tells OpenAI's SDKs whether to retry an error answer,
// before their status rules (openai-node 6.30.1, client.js shouldRetry:
// "true" retries, "false" does not, else 408, 409, 429 and 5xx are
// retried). Every error carries it: "true"
// only with a Retry-After (a 429 or 503: room is projected), "false"
// otherwise — an engine fault reaches the client only after the router
// placed the request again itself, and a client's own mistake (a 408 or
// 409 included, which the SDKs would otherwise retry) cannot succeed
// unchanged.
const ShouldRetryHeader = "X-Should-Retry"

// Write sends the error. Messages never carry engine URLs or upstream
// exception text: the detail goes to the journal only (an engine's own
// 4xx message is passed on only after vllm sanitized it).
func (e *Error) Write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(ShouldRetryHeader, "false")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
		h.Set(ShouldRetryHeader, "true")
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(e.Event(), '\n'))
}

// Event is the error's JSON alone: the body Write sends, and the one
// terminal event of a stream whose status already went out.
func (e *Error) Event() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(errorBody{errorFields{Message: e.Message, Type: e.Type, Param: e.Param, Code: e.Code}})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// BadRequest is a 400 for the field param ("" for none), with code naming
// what is wrong with it: invalid_type, invalid_value, unsupported_value,
// context_length_exceeded, invalid_json.
func BadRequest(code, param, msg string) *Error {
	return &Error{Status: 400, Type: TypeInvalid, Code: optional(code), Param: optional(param), Message: msg}
}

// InvalidType is a field of the wrong JSON type.
func InvalidType(param, msg string) *Error { return BadRequest("invalid_type", param, msg) }

// InvalidValue is a field of the right type and a value out of range.
func InvalidValue(param, msg string) *Error { return BadRequest("invalid_value", param, msg) }

// Unsupported is a valid OpenAI value the two-leg path cannot serve.
func Unsupported(param, msg string) *Error { return BadRequest("unsupported_value", param, msg) }

// Invalid is a client mistake answered with another 4xx (403, 404, 405,
// 408, 413, 415) and narwhal's reason in code; no field is named.
func Invalid(status int, code, msg string) *Error {
	return &Error{Status: status, Message: msg, Type: TypeInvalid, Code: strp(code)}
}

// ModelNotFound is a 404 for a model this router does not serve.
func ModelNotFound(asked, served string) *Error {
	return &Error{Status: 404, Type: TypeInvalid, Code: strp("model_not_found"), Param: strp("model"),
		Message: fmt.Sprintf("The model `%s` does not exist; this router serves `%s`.", asked, served)}
}

// Overloaded is a 429: the router is at a limit now; code is the journal
// reason or refusal cause.
func Overloaded(code, msg string, retryAfter int) *Error {
	return &Error{Status: 429, Type: TypeRateLimit, Code: strp(code), Message: msg, RetryAfter: max(1, retryAfter)}
}

// Unavailable is a 503: this router cannot place work now. code is the
// readiness kind (standby, backend_unavailable, no_schedulable_engines).
func Unavailable(code, msg string) *Error {
	return &Error{Status: 503, Type: TypeUnavailable, Code: strp(code), Message: msg, RetryAfter: 1}
}

// ServerError is an engine or router fault with its status and code.
func ServerError(status int, code, msg string) *Error {
	return &Error{Status: status, Type: TypeServer, Code: strp(code), Message: msg}
}

// Upstream is a failure of a leg before any output reached the client: the
// phase is the code, the message is always the same.
func Upstream(phase string, timeout bool) *Error {
	status := 502
	if timeout {
		status = 504
	}
	return ServerError(status, phase, "Upstream request failed")
}

// LegError answers a failed engine call: the engine's own refusal of the
// request (its 400, 413 or 422) goes back with its status and sanitized
// message, since retrying cannot help; anything else is upstream's, with
// code naming the step that failed (its phase, or tokenize for the
// /tokenize pass-through).
func LegError(code string, e *fault.Error) *Error {
	if !e.ClientFault() {
		return Upstream(code, e.Timeout)
	}
	msg := e.ClientMessage
	if msg == "" {
		msg = "the engine refused the request as invalid"
	}
	return &Error{Status: e.Status, Type: TypeInvalid, Code: strp(string(fault.EngineRejected)), Param: optional(e.ClientParam), Message: msg}
}
