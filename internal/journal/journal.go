// Package journal writes and reads the request journal, narwhal.journal
// schema version 1 (runtime.md §4): one JSON object per line, a meta row
// at every open, then terminal request rows and event rows from one run.
//
// It is the only code that spells a journal row (DESIGN.md rule 3):
//
//	w, err := journal.Open(path, journal.Options{Version: version.Version})
//	defer w.Close()
//	w.Request(&journal.RequestRow{RID: rid, Terminal: journal.TerminalCompleted, ...})
//	w.Event(journal.EngineEjected(at, iid, cause))
//
// Readers (narwhal report, tests) use NewReader or ReadFile and Terminals
// to check that every admitted request has exactly one terminal row.
package journal

// Schema and SchemaVersion identify the rows this build writes and reads.
const (
	Schema        = "narwhal.journal"
	SchemaVersion = 1
)

// Terminal outcomes (runtime.md §1.17): exactly one per original request.
const (
	TerminalCompleted = "completed"
	TerminalFailed    = "failed"
	TerminalRefused   = "refused"
	TerminalRejected  = "rejected"
	TerminalExpired   = "expired"
	TerminalInvalid   = "invalid"
	TerminalCancelled = "cancelled"
)

// Failure reasons (terminal failed; also attempt failure reasons).
const (
	ReasonNoEngine          = "no_engine"
	ReasonEngineUnreachable = "engine_unreachable"
	ReasonEngineConnection  = "engine_connection"
	ReasonEngineTimeout     = "engine_timeout"
	ReasonEngineOverloaded  = "engine_overloaded"
	ReasonEngineRejected    = "engine_rejected"
	ReasonEngineError       = "engine_error"
	ReasonLocalPool         = "local_pool"
	ReasonInvalidResponse   = "invalid_response"
	ReasonResponseLimit     = "response_limit"
	ReasonInternal          = "internal"
	// ReasonOutputCut ends a stream the engine cut after output reached
	// the client: it cannot be retried, the client sees a failed stream.
	ReasonOutputCut = "output_cut"
	// ReasonRouterLost closes a request the router admitted and then lost
	// track of: it was killed (or crashed) before the request ended. The
	// next router that resumes from the same journal writes the row.
	ReasonRouterLost = "router_lost"
)

// Rejection reasons (terminal rejected). Unclassified only absorbs a
// restored counter's unexplained remainder after resume (§3.7).
const (
	ReasonInflightLimit = "inflight_limit"
	ReasonSaturated     = "saturated"
	ReasonNotReady      = "not_ready"
	ReasonUnclassified  = "unclassified"
)

// Refusal causes (terminal refused; the row's reason and the metrics'
// cause label). CauseDecode is the journal's refused_cause for the three
// decode-check causes.
const (
	CauseQueue             = "queue"
	CausePrompt            = "prompt"
	CauseAggregateUnpriced = "aggregate_unpriced"
	CauseSlotWait          = "slot_wait"
	CauseKVCapacity        = "kv_capacity"
	CauseTPOT              = "tpot"
	CauseDecode            = "decode"
	// CauseDeadline: the request waited in the deadline queue until its
	// TTFT target could no longer be met; CauseQueueFull: the queue was at
	// its bound when it arrived.
	CauseDeadline  = "deadline"
	CauseQueueFull = "queue_full"
)

// Expiry reasons (terminal expired).
const (
	ReasonDeadline     = "deadline"
	ReasonQueueTimeout = "queue_timeout"
	ReasonHandoff      = "handoff"
)

// Phases: cancelled_phase values and attempt failure phases.
const (
	PhaseAdmission = "admission"
	PhaseQueue     = "queue"
	PhaseBackoff   = "backoff"
	PhasePrefill   = "prefill"
	PhaseDecode    = "decode"
)

// Retry decisions recorded in attempt_failures[].retry_reason (§1.15).
const (
	RetryAllowed          = "allowed"
	RetryNotDispatched    = "not_dispatched"
	RetryOutputStarted    = "output_started"
	RetryAttemptLimit     = "attempt_limit"
	RetryNonTransient     = "non_transient"
	RetryOriginalDeadline = "original_deadline"
	RetrySharedBudget     = "shared_budget"
	// RetryFailover: the leg never reached its engine (connect error), so
	// it moved to another engine within the same attempt, at no credit.
	RetryFailover = "failover"
	// RetryReplaced: the engine answered 5xx, or cut the connection, before
	// any output; the router placed the leg again on another engine itself
	// (once per leg, within the TTFT budget), so the client's SDK need not.
	RetryReplaced = "replaced"
)

// Token accounting modes (row and meta token_accounting).
const (
	TokenIDs         = "token_ids"
	TokenUnavailable = "unavailable"
)

// TerminalValues lists every terminal outcome. Each call returns a fresh slice.
func TerminalValues() []string {
	return []string{TerminalCompleted, TerminalFailed, TerminalRefused, TerminalRejected,
		TerminalExpired, TerminalInvalid, TerminalCancelled}
}

// FailedReasons lists every documented failure reason.
func FailedReasons() []string {
	return []string{ReasonNoEngine, ReasonEngineUnreachable, ReasonEngineConnection,
		ReasonEngineTimeout, ReasonEngineOverloaded, ReasonEngineRejected, ReasonEngineError,
		ReasonLocalPool, ReasonInvalidResponse, ReasonResponseLimit, ReasonInternal, ReasonOutputCut, ReasonRouterLost}
}

// RejectedReasons lists the rejection reasons exported from start
// (unclassified is left out: it appears only once it occurs).
func RejectedReasons() []string {
	return []string{ReasonInflightLimit, ReasonSaturated, ReasonNotReady}
}

// RefusedCauses lists the refusal causes of the metrics' cause label.
func RefusedCauses() []string {
	return []string{CauseQueue, CausePrompt, CauseAggregateUnpriced, CauseSlotWait,
		CauseKVCapacity, CauseTPOT, CauseDeadline, CauseQueueFull}
}

// ExpiredReasons lists every documented expiry reason.
func ExpiredReasons() []string {
	return []string{ReasonDeadline, ReasonQueueTimeout, ReasonHandoff}
}

// reasonsOf returns the reasons a row with this terminal may carry; nil
// means the reason must be null.
func reasonsOf(terminal string) []string {
	switch terminal {
	case TerminalFailed:
		return FailedReasons()
	case TerminalRejected:
		return RejectedReasons() // unclassified is a counter remainder, never a row
	case TerminalRefused:
		return RefusedCauses()
	case TerminalExpired:
		return ExpiredReasons()
	}
	return nil
}
