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

import "github.com/narwhal-go/narwhal/internal/fault"

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

// The reasons of failed, rejected and expired rows, and the phases of
// cancelled_phase and attempt failures, are the request path's one
// vocabulary: fault.Reason and fault.Phase, declared there once.

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
func FailedReasons() []string { return fault.Strings(fault.FailedReasons()) }

// RejectedReasons lists the rejection reasons exported from start
// (unclassified is left out: it appears only once it occurs).
func RejectedReasons() []string { return fault.Strings(fault.RejectedReasons()) }

// RefusedCauses lists the refusal causes of the metrics' cause label.
func RefusedCauses() []string {
	return []string{CauseQueue, CausePrompt, CauseAggregateUnpriced, CauseSlotWait,
		CauseKVCapacity, CauseTPOT, CauseDeadline, CauseQueueFull}
}

// ExpiredReasons lists every documented expiry reason.
func ExpiredReasons() []string { return fault.Strings(fault.ExpiredReasons()) }

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
