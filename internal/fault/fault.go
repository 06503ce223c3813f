// Package fault is the request path's one error vocabulary: the Phase a
// request is in, the Reason it (or one of its legs) failed, and the
// breaker Class of a leg failure, with Error, one failed step carrying
// them. Functions on the request path return error; callers classify with
// errors.As (or As). It imports nothing of the project, so the engine
// client (vllm), the journal, the response assembler (openai) and the
// router all speak it without depending on each other.
//
// A Reason's spelling is a wire format: the journal's reason values and
// the metrics' reason labels (runtime.md §4). It is declared here once.
package fault

// Phase is where a request is: the journal's cancelled_phase and
// attempt_failures[].phase, the metrics' phase label, and the step an
// Error came from (admission is the prompt count on /tokenize).
type Phase string

// The phases, in the order a request passes them.
const (
	Admission Phase = "admission"
	Queue     Phase = "queue"
	Backoff   Phase = "backoff"
	Prefill   Phase = "prefill"
	Decode    Phase = "decode"
	// Health is a probe's call to an engine outside any request (its
	// /version, /health or a check's /tokenize).
	Health Phase = "health"
)

// Reason is why a request ended failed, rejected or expired, or why one of
// its attempts failed.
type Reason string

// Failure reasons (terminal failed; also attempt failure reasons).
const (
	NoEngine          Reason = "no_engine"
	EngineUnreachable Reason = "engine_unreachable"
	EngineConnection  Reason = "engine_connection"
	EngineTimeout     Reason = "engine_timeout"
	EngineOverloaded  Reason = "engine_overloaded"
	EngineRejected    Reason = "engine_rejected"
	EngineError       Reason = "engine_error"
	LocalPool         Reason = "local_pool"
	InvalidResponse   Reason = "invalid_response"
	ResponseLimit     Reason = "response_limit"
	Internal          Reason = "internal"
	// OutputCut ends a stream the engine cut after output reached the
	// client: it cannot be retried, the client sees a failed stream.
	OutputCut Reason = "output_cut"
	// RouterLost closes a request the router admitted and then lost track
	// of: it was killed (or crashed) before the request ended. The next
	// router that resumes from the same journal writes the row.
	RouterLost Reason = "router_lost"
	// ClientGone ends a leg whose client stopped reading. It never reaches
	// a journal row: the call settles as cancelled.
	ClientGone Reason = "cancelled"
)

// Rejection reasons (terminal rejected). Unclassified only absorbs a
// restored counter's unexplained remainder after resume (§3.7).
const (
	InflightLimit Reason = "inflight_limit"
	Saturated     Reason = "saturated"
	NotReady      Reason = "not_ready"
	Unclassified  Reason = "unclassified"
)

// Expiry reasons (terminal expired).
const (
	Deadline     Reason = "deadline"
	QueueTimeout Reason = "queue_timeout"
	Handoff      Reason = "handoff"
)

// FailedReasons lists every documented failure reason.
func FailedReasons() []Reason {
	return []Reason{NoEngine, EngineUnreachable, EngineConnection, EngineTimeout, EngineOverloaded,
		EngineRejected, EngineError, LocalPool, InvalidResponse, ResponseLimit, Internal, OutputCut, RouterLost}
}

// RejectedReasons lists the rejection reasons exported from start
// (unclassified is left out: it appears only once it occurs).
func RejectedReasons() []Reason { return []Reason{InflightLimit, Saturated, NotReady} }

// ExpiredReasons lists every documented expiry reason.
func ExpiredReasons() []Reason { return []Reason{Deadline, QueueTimeout, Handoff} }

// Strings spells reasons as the journal and the metrics' labels do.
func Strings(rs []Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// Class is the breaker class of a leg failure (runtime.md §3.2): each has
// its own failure streak per engine. lifecycle.Class is this type, with
// the breaker's own liveness class beside these.
type Class string

// The classes an Error carries ("" for a failure that is no engine's:
// no live engine, the client gone).
const (
	ClassConnection      Class = "connection"       // refused or unreachable
	ClassTimeout         Class = "timeout"          // transport timeout
	ClassOverload        Class = "overload"         // 408/429
	ClassInferenceStatus Class = "inference_status" // another engine status
	ClassKVHandoff       Class = "kv_handoff"       // no readable or timely KV handoff
	ClassStream          Class = "stream"           // silence or an invalid end of a decode stream
	ClassOutputCut       Class = "output_cut"       // a stream with tokens ended without [DONE]
)
