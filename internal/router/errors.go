package router

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Error types are OpenAI's (docs/router.md, "Errors"): what kind of
// failure it is and so what a client should do. narwhal's own reason goes
// in code.
const (
	// typeInvalid: the client's request cannot succeed as sent (400, 404,
	// 405, 408, 413, and an engine's own 4xx). Do not retry it unchanged.
	typeInvalid = "invalid_request_error"
	// typeRateLimit: the router is at a limit right now (429 with
	// Retry-After). Retry later.
	typeRateLimit = "rate_limit_error"
	// typeUnavailable: this router cannot place work (503 with
	// Retry-After): standby, fenced, held, shutting down, no engine.
	typeUnavailable = "service_unavailable_error"
	// typeServer: an engine or router fault (500, 502, 504).
	typeServer = "server_error"
)

// apiError is an OpenAI-shaped error body and the status that goes with it.
type apiError struct {
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

// write sends the error. Messages never carry engine URLs or upstream
// exception text: the detail goes to the journal only (an engine's own
// 4xx message is passed on only after vllm sanitized it).
func (e *apiError) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(errorBody{errorFields{Message: e.Message, Type: e.Type, Param: e.Param, Code: e.Code}})
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// badRequest is a 400 for the field param ("" for none), with code naming
// what is wrong with it: invalid_type, invalid_value, unsupported_value,
// context_length_exceeded, invalid_json.
func badRequest(code, param, msg string) *apiError {
	return &apiError{Status: 400, Type: typeInvalid, Code: optional(code), Param: optional(param), Message: msg}
}

// invalidType is a field of the wrong JSON type.
func invalidType(param, msg string) *apiError { return badRequest("invalid_type", param, msg) }

// invalidValue is a field of the right type and a value out of range.
func invalidValue(param, msg string) *apiError { return badRequest("invalid_value", param, msg) }

// unsupported is a valid OpenAI value the two-leg path cannot serve.
func unsupported(param, msg string) *apiError { return badRequest("unsupported_value", param, msg) }

// overloaded is a 429: the router is at a limit now; code is the journal
// reason or refusal cause.
func overloaded(code, msg string, retryAfter int) *apiError {
	return &apiError{Status: 429, Type: typeRateLimit, Code: strp(code), Message: msg, RetryAfter: max(1, retryAfter)}
}

// unavailable is a 503: this router cannot place work now. code is the
// readiness kind (standby, backend_unavailable, no_schedulable_engines).
func unavailable(code, msg string) *apiError {
	return &apiError{Status: 503, Type: typeUnavailable, Code: strp(code), Message: msg, RetryAfter: 1}
}

// serverError is an engine or router fault with its status and code.
func serverError(status int, code, msg string) *apiError {
	return &apiError{Status: status, Type: typeServer, Code: strp(code), Message: msg}
}

// upstream is a failure of a leg before any output reached the client: the
// phase is the code, the message is always the same.
func upstream(phase string, timeout bool) *apiError {
	status := 502
	if timeout {
		status = 504
	}
	return serverError(status, phase, "Upstream request failed")
}

// legError answers a failed engine call: the engine's own refusal of the
// request (its 400, 413 or 422) goes back with its status and sanitized
// message, since retrying cannot help; anything else is upstream's.
func legError(phase string, e *vllm.Error) *apiError {
	if !e.ClientFault() {
		return upstream(phase, e.Timeout)
	}
	msg := e.ClientMessage
	if msg == "" {
		msg = "the engine refused the request as invalid"
	}
	return &apiError{Status: e.Status, Type: typeInvalid, Code: strp(vllm.ReasonRejected), Param: optional(e.ClientParam), Message: msg}
}
