package router

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// apiError is an OpenAI-shaped error body and the status that goes with it.
type apiError struct {
	Status     int
	Message    string
	Type       string
	Code       *string
	Param      *string
	WithCode   bool // write "code" (null when Code is nil)
	WithParam  bool
	RetryAfter int // seconds; 0 sends no Retry-After
}

func strp(s string) *string { return &s }

// write sends the error. Messages never carry engine URLs or upstream
// exception text: the detail goes to the journal only.
func (e *apiError) write(w http.ResponseWriter) {
	body := map[string]any{"message": e.Message, "type": e.Type}
	if e.WithCode || e.Code != nil {
		body["code"] = e.Code
	}
	if e.WithParam || e.Param != nil {
		body["param"] = e.Param
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": body})
}

// Errors with fixed wording.

func invalidRequest(msg, param string) *apiError {
	e := &apiError{Status: 400, Message: msg, Type: "invalid_request_error", WithCode: true, WithParam: true}
	if param != "" {
		e.Param = strp(param)
	}
	return e
}

// upstream is a failure of a leg before any output reached the client: the
// phase names type and code, the message is always the same.
func upstream(phase string, timeout bool) *apiError {
	status := 502
	if timeout {
		status = 504
	}
	return &apiError{Status: status, Message: "Upstream request failed", Type: phase, Code: strp(phase)}
}

func typed(status int, typ, msg string, retryAfter int) *apiError {
	return &apiError{Status: status, Message: msg, Type: typ, Code: strp(typ), RetryAfter: retryAfter}
}
