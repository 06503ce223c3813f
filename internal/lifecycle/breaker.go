// Package lifecycle decides which engines may take work: a per-class
// circuit breaker that tells a dead engine from a busy one, ejection and
// readmission with last-engine protection, process identity (restart
// detection), and operator drains with their validation gates. It holds
// state and rules only — no lock, no I/O, no clock — and is driven like
// sched: Step feeds it what happened, Ready says what to do (step.go).
// The availability supervisor (internal/avail) serializes it, runs the
// probes, reports back, and publishes the liveness decided here into the
// scheduling core.
package lifecycle

import "github.com/narwhal-go/narwhal/internal/fault"

// Class is a kind of leg failure; each has its own streak per engine. It
// is fault.Class, the one spelling, so a leg's error feeds the breaker as
// it is.
type Class = fault.Class

// Failure classes (runtime.md §3.2): fault's, and the one only the
// breaker has.
const (
	Connection      = fault.ClassConnection      // refused or unreachable
	Timeout         = fault.ClassTimeout         // transport timeout
	Overload        = fault.ClassOverload        // 408/429, or no first token while the engine emits other output
	InferenceStatus = fault.ClassInferenceStatus // other 5xx
	KVHandoff       = fault.ClassKVHandoff       // a prefill 200 without a readable handoff
	Stream          = fault.ClassStream          // silence or an invalid end of a decode stream
	// OutputCut: a decode stream that had produced tokens ended without
	// [DONE]. Its own class because a short probe passes on an engine that
	// cuts long streams: only a stream reaching [DONE] clears it.
	OutputCut = fault.ClassOutputCut
	// Liveness is missed liveness sweeps (its own threshold); no leg
	// error carries it.
	Liveness Class = "liveness"
)

// Classes lists every class, for zero-valued metrics and state.
var Classes = []Class{Connection, Timeout, Overload, InferenceStatus, KVHandoff, Stream, Liveness, OutputCut}

// Verdict is what the breaker asks the router to do.
type Verdict int

const (
	// None: below threshold, keep serving.
	None Verdict = iota
	// Eject now: connection-shaped failures mean the process is gone.
	Eject
	// VerifyHealth: timeout-shaped failures may be a busy engine; eject only
	// if /health fails too.
	VerifyHealth
	// VerifyInference: the engine answers but its work is bad; eject only if
	// a direct inference probe fails too.
	VerifyInference
	// EjectCovered: eject unless the engine is the last live one of its
	// role (a cutting engine still serves short requests).
	EjectCovered
)

func (v Verdict) String() string {
	switch v {
	case Eject:
		return "eject"
	case VerifyHealth:
		return "verify_health"
	case VerifyInference:
		return "verify_inference"
	case EjectCovered:
		return "eject_covered"
	}
	return "none"
}

func verdictOf(c Class) Verdict {
	switch c {
	case Connection, Liveness:
		return Eject
	case Timeout, Overload:
		return VerifyHealth
	case OutputCut:
		return EjectCovered
	}
	return VerifyInference
}

// cleared lists the classes a kind of success resets (§3.2).
var cleared = map[string][]Class{
	"answered":  {Connection, InferenceStatus},                    // a 4xx other than 408/429: the engine is up
	"health":    {Connection, Timeout, Overload, Liveness},        // /health 200
	"prefill":   {Connection, InferenceStatus, KVHandoff},         // a handoff extracted
	"decode":    {Connection, InferenceStatus, Stream, OutputCut}, // a stream reached [DONE]
	"inference": {Connection, InferenceStatus, KVHandoff, Stream}, // an inference probe passed
}
