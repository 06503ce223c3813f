package vllm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// statusError classifies an engine HTTP status; detail is the response
// body (or the in-stream error message).
func statusError(phase fault.Phase, status int, detail string) *fault.Error {
	e := &fault.Error{Phase: phase, Status: status, Class: fault.ClassInferenceStatus,
		Msg: fmt.Sprintf("engine answered HTTP %d: %s", status, truncate(detail, 200))}
	if status >= 400 && status < 500 {
		e.ClientMessage, e.ClientParam = clientDetail(detail)
	}
	switch {
	case status == 401 || status == 403:
		// The engine refused the router's credential: the router's fault
		// (engine.engine_api_key_env), never the client's.
		e.Reason = fault.EngineError
		e.Msg = fmt.Sprintf("engine refused the router's credential (HTTP %d): set engine.engine_api_key_env to the variable holding the engine's --api-key", status)
	case status == 408 || status == 429:
		e.Reason, e.Timeout, e.Class = fault.EngineOverloaded, status == 408, fault.ClassOverload
	case status == 504:
		e.Reason, e.Timeout, e.Class = fault.EngineTimeout, true, fault.ClassTimeout
	case status >= 400 && status < 500:
		e.Reason = fault.EngineRejected
	default:
		e.Reason = fault.EngineError
	}
	return e
}

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
func HandshakeRefusal(e *fault.Error) (Handshake, bool) {
	if e == nil || e.Phase != fault.Decode {
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
func transportError(phase fault.Phase, err error, what string) *fault.Error {
	e := &fault.Error{Phase: phase, Msg: what + ": " + err.Error()}
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		e.Reason, e.Class = fault.EngineUnreachable, fault.ClassConnection
		e.Timeout = op.Timeout()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		e.Reason, e.Timeout, e.Class = fault.EngineTimeout, true, fault.ClassTimeout
	default:
		e.Reason, e.Class = fault.EngineConnection, fault.ClassConnection
	}
	return e
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// invalid is a malformed engine response.
func invalid(phase fault.Phase, class fault.Class, format string, args ...any) *fault.Error {
	return &fault.Error{Phase: phase, Reason: fault.InvalidResponse, Class: class, Msg: fmt.Sprintf(format, args...)}
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
