package vllm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// Failure reasons, as the journal and metrics name them.
const (
	ReasonUnreachable     = "engine_unreachable"
	ReasonConnection      = "engine_connection"
	ReasonTimeout         = "engine_timeout"
	ReasonOverloaded      = "engine_overloaded"
	ReasonRejected        = "engine_rejected"
	ReasonEngineError     = "engine_error"
	ReasonLocalPool       = "local_pool"
	ReasonInvalidResponse = "invalid_response"
	ReasonResponseLimit   = "response_limit"
)

// Error is one failed engine call.
type Error struct {
	Phase   string // admission (tokenize), prefill or decode
	Reason  string // one of the Reason constants
	Status  int    // engine HTTP status, 0 when none was received
	Timeout bool   // timeout-shaped: answers 504 rather than 502
	Msg     string // detail for the journal; may name engine URLs
	// Class is the breaker class: connection, timeout, overload,
	// inference_status, kv_handoff or stream.
	Class string
	// ClientMessage and ClientParam are the engine's own explanation of a
	// 4xx, from its OpenAI or FastAPI error body, with URLs, hosts and
	// credentials removed: safe to show the client (see ClientFault).
	ClientMessage string
	ClientParam   string
}

func (e *Error) Error() string { return e.Phase + ": " + e.Msg }

// CutAfter reports whether a decode leg that failed after streaming
// tokens was cut by the engine (output started, then the stream ended
// without [DONE]) rather than stopped by one of the router's own limits.
func (e *Error) CutAfter(tokens int) bool {
	if tokens <= 0 {
		return false
	}
	switch e.Reason {
	case ReasonLocalPool, ReasonRejected, ReasonResponseLimit:
		return false
	}
	return true
}

// Transient reports whether a retry on another engine may succeed.
func (e *Error) Transient() bool {
	switch e.Reason {
	case ReasonLocalPool, ReasonRejected, ReasonResponseLimit:
		return false
	case ReasonInvalidResponse:
		return e.Class == "kv_handoff" || e.Class == "stream"
	}
	return true
}

// ClientFault reports whether the engine refused the request itself as
// invalid (HTTP 400, 413 or 422): the client's mistake, which no retry or
// other engine can fix. Other 4xx (401, 403, 404, …) mean the router or
// the engine is misconfigured and stay engine faults.
func (e *Error) ClientFault() bool {
	if e.Reason != ReasonRejected {
		return false
	}
	switch e.Status {
	case 400, 413, 422:
		return true
	}
	return false
}

// statusError classifies an engine HTTP status; detail is the response
// body (or the in-stream error message).
func statusError(phase string, status int, detail string) *Error {
	e := &Error{Phase: phase, Status: status, Class: "inference_status",
		Msg: fmt.Sprintf("engine answered HTTP %d: %s", status, truncate(detail, 200))}
	if status >= 400 && status < 500 {
		e.ClientMessage, e.ClientParam = clientDetail(detail)
	}
	switch {
	case status == 401 || status == 403:
		// The engine refused the router's credential: the router's fault
		// (engine.engine_api_key_env), never the client's.
		e.Reason = ReasonEngineError
		e.Msg = fmt.Sprintf("engine refused the router's credential (HTTP %d): set engine.engine_api_key_env to the variable holding the engine's --api-key", status)
	case status == 408 || status == 429:
		e.Reason, e.Timeout, e.Class = ReasonOverloaded, status == 408, "overload"
	case status == 504:
		e.Reason, e.Timeout, e.Class = ReasonTimeout, true, "timeout"
	case status >= 400 && status < 500:
		e.Reason = ReasonRejected
	default:
		e.Reason = ReasonEngineError
	}
	return e
}

// AuthFailed reports an engine answer of 401 or 403: the engine refused
// the router's credential.
func (e *Error) AuthFailed() bool { return e != nil && (e.Status == 401 || e.Status == 403) }

// Handshake is a consumer's refusal of a producer's KV at the NIXL
// handshake (vllm-protocol.md §9.6): the engines' compatibility hashes
// differ, or the handshake payload did not decode (another connector
// version). The hashes are "" when the message does not carry them.
type Handshake struct {
	LocalHash  string // the consumer's (the engine that reported it)
	RemoteHash string // the producer's
}

// Handshake markers: vLLM's own texts, which the engine relays in the
// stream's error event.
const (
	hashMismatch  = "NIXL compatibility hash mismatch"
	payloadDecode = "Failed to decode NixlHandshakePayload"
)

// HandshakeRefusal classifies a failed decode leg as a NIXL
// compatibility refusal: retrying the same pair cannot succeed.
func (e *Error) HandshakeRefusal() (Handshake, bool) {
	if e == nil || e.Phase != "decode" {
		return Handshake{}, false
	}
	switch {
	case strings.Contains(e.Msg, hashMismatch):
		return Handshake{LocalHash: hexAfter(e.Msg, "Local: "), RemoteHash: hexAfter(e.Msg, "Remote: ")}, true
	case strings.Contains(e.Msg, payloadDecode):
		return Handshake{}, true
	}
	return Handshake{}, false
}

// hexAfter is the run of hex digits following marker in s, or "".
func hexAfter(s, marker string) string {
	i := strings.Index(s, marker)
	if i < 0 {
		return ""
	}
	s = s[i+len(marker):]
	n := 0
	for n < len(s) && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[n])) {
		n++
	}
	return strings.ToLower(s[:n])
}

// transportError classifies a failure to get a response at all.
func transportError(phase string, err error, what string) *Error {
	e := &Error{Phase: phase, Msg: what + ": " + err.Error()}
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		e.Reason, e.Class = ReasonUnreachable, "connection"
		e.Timeout = op.Timeout()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		e.Reason, e.Timeout, e.Class = ReasonTimeout, true, "timeout"
	default:
		e.Reason, e.Class = ReasonConnection, "connection"
	}
	return e
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// invalid is a malformed engine response.
func invalid(phase, class, format string, args ...any) *Error {
	return &Error{Phase: phase, Reason: ReasonInvalidResponse, Class: class, Msg: fmt.Sprintf(format, args...)}
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
