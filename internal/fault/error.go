package fault

import "errors"

// Error is one failed step of a request: a leg on an engine, the prompt
// count, or the router's own bound on a leg (a KV handoff that expired,
// a response over its limit).
type Error struct {
	Phase   Phase  // admission (tokenize), prefill or decode
	Reason  Reason // a failure reason
	Status  int    // engine HTTP status, 0 when none was received
	Timeout bool   // timeout-shaped: answers 504 rather than 502
	Msg     string // detail for the journal; may name engine URLs
	Class   Class  // the breaker class
	// ClientMessage and ClientParam are the engine's own explanation of a
	// 4xx, from its OpenAI or FastAPI error body, with URLs, hosts and
	// credentials removed: safe to show the client (see ClientFault).
	ClientMessage string
	ClientParam   string
}

func (e *Error) Error() string { return string(e.Phase) + ": " + e.Msg }

// As is the *Error in err's chain, or nil: errors.As for callers that
// classify.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Of is err's *Error; an error from outside the vocabulary (a bug: every
// request-path step returns an *Error) becomes an internal failure of
// phase, so a caller always has a reason to journal.
func Of(err error, phase Phase) *Error {
	if e := As(err); e != nil {
		return e
	}
	return &Error{Phase: phase, Reason: Internal, Msg: err.Error()}
}

// CutAfter reports whether a decode leg that failed after streaming
// tokens was cut by the engine (output started, then the stream ended
// without [DONE]) rather than stopped by one of the router's own limits.
func (e *Error) CutAfter(tokens int) bool {
	if tokens <= 0 {
		return false
	}
	switch e.Reason {
	case LocalPool, EngineRejected, ResponseLimit:
		return false
	}
	return true
}

// Transient reports whether a retry on another engine may succeed.
func (e *Error) Transient() bool {
	switch e.Reason {
	case LocalPool, EngineRejected, ResponseLimit:
		return false
	case InvalidResponse:
		return e.Class == ClassKVHandoff || e.Class == ClassStream
	}
	return true
}

// ClientFault reports whether the engine refused the request itself as
// invalid (HTTP 400, 413 or 422): the client's mistake, which no retry or
// other engine can fix. Other 4xx (401, 403, 404, …) mean the router or
// the engine is misconfigured and stay engine faults.
func (e *Error) ClientFault() bool {
	if e.Reason != EngineRejected {
		return false
	}
	switch e.Status {
	case 400, 413, 422:
		return true
	}
	return false
}

// AuthFailed reports an engine answer of 401 or 403: the engine refused
// the router's credential.
func (e *Error) AuthFailed() bool { return e != nil && (e.Status == 401 || e.Status == 403) }

// Detail is err's journal detail: an *Error's Msg (without its phase),
// any other error's text.
func Detail(err error) string {
	if e := As(err); e != nil {
		return e.Msg
	}
	return err.Error()
}
