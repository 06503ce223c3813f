package openai

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// The core's refusals carry a cause; what each cause means to a client
// (an HTTP status, an OpenAI error type and code) and to the journal is
// decided here, in one table (docs/router.md, "Errors"); the router asks
// Refusal for the answer.

// RefusalLeg is the placement step a refusal came from, as far as the
// answer differs by it.
type RefusalLeg int

const (
	FirstPrefill RefusalLeg = iota // the request's first attempt's prefill step
	RetryPrefill                   // a later attempt's: answers as FirstPrefill unless it has its own row
	DecodeLeg
)

type refusalKey struct {
	leg   RefusalLeg
	cause string
}

// refusalRule is one row of the table. The status picks the error type:
// 400 invalid_request_error, 429 rate_limit_error (the core's Retry-After,
// at least 1 s), 503 service_unavailable_error (Retry-After 1), 504
// server_error.
type refusalRule struct {
	status   int
	code     string // "" is the cause itself
	message  string // the client's; "" is the core's own
	detail   string // the journal's; "" is the core's message
	terminal string
	reason   fault.Reason // the journal's; "" is the cause itself
	// notDispatched marks the previous attempt's recorded failure: the
	// retry it scheduled never dispatched.
	notDispatched bool
}

var refusalRules = map[refusalKey]refusalRule{
	// Load that passes.
	{FirstPrefill, sched.CauseQueue}:             {status: 429, terminal: journal.TerminalRefused},
	{FirstPrefill, sched.CauseAggregateUnpriced}: {status: 429, terminal: journal.TerminalRefused},
	{FirstPrefill, sched.CauseKVCapacity}:        {status: 429, terminal: journal.TerminalRefused},
	{FirstPrefill, sched.CauseTPOT}:              {status: 429, terminal: journal.TerminalRefused},
	// The deadline queue: waited until the TTFT target could not be met,
	// or full on arrival. Retry-After is the core's drain projection.
	{FirstPrefill, sched.CauseDeadline}:  {status: 429, terminal: journal.TerminalRefused},
	{FirstPrefill, sched.CauseQueueFull}: {status: 429, terminal: journal.TerminalRefused},
	// The client's to fix: the reference answers 429, which every SDK
	// retries in vain (Prompt.refusal writes the message).
	{FirstPrefill, sched.CausePrompt}: {status: 400, code: "prompt_exceeds_ttft_slo", terminal: journal.TerminalRefused},
	{FirstPrefill, sched.CauseNoEngine}: {status: 503, code: "no_schedulable_engines", message: "no engine can take this request now",
		terminal: journal.TerminalFailed, reason: fault.NoEngine},
	{RetryPrefill, sched.CauseNoEngine}: {status: 503, code: "backend_unavailable", message: "no engine is left to retry on",
		terminal: journal.TerminalFailed, reason: fault.NoEngine, notDispatched: true},
	// Seats: the answer once waiting for one ran out (the decode leg's
	// wait ends as an expired KV handoff instead, which may be retried).
	{FirstPrefill, sched.CauseSeats}: {status: 504, code: "expired", message: "no prefill seat freed within the queue timeout",
		detail: "no prefill seat within serving.queue_timeout_s", terminal: journal.TerminalExpired, reason: fault.QueueTimeout},
	{DecodeLeg, sched.CauseNoEngine}: {status: 503, code: "backend_unavailable", message: "no engine can take the decode leg now",
		terminal: journal.TerminalFailed, reason: fault.NoEngine},
}

// refusalRuleFor is the table's row for a refusal; false when it has none
// (a cause the router does not know: its bug, answered 500).
func refusalRuleFor(leg RefusalLeg, cause string) (refusalRule, bool) {
	rule, ok := refusalRules[refusalKey{leg, cause}]
	if !ok && leg == RetryPrefill {
		rule, ok = refusalRules[refusalKey{FirstPrefill, cause}]
	}
	return rule, ok
}

// Prompt is what a prompt refusal's message says: the prompt's size, its
// own prefill on the fastest engine, and the TTFT budget it misses.
type Prompt struct {
	Chat       bool
	Tokens     int
	OwnPrefill float64 // seconds
	TTFT       float64 // slo.ttft_s
	Margin     float64 // serving.admission_margin
}

// RefusalAnswer is what a refusal means: the client's error and the
// journal's terminal, reason and detail.
type RefusalAnswer struct {
	Err              *Error
	Terminal, Detail string
	// Reason is the row's: a failure or expiry reason, or for a refused
	// row the refusal cause itself.
	Reason fault.Reason
	// NotDispatched marks the previous attempt's recorded failure: the
	// retry it scheduled never dispatched.
	NotDispatched bool
}

// Refusal is the answer to the core's refusal ref from leg's step. A
// cause without a row is the router's bug: a 500.
func Refusal(leg RefusalLeg, ref *sched.Refusal, p Prompt) RefusalAnswer {
	rule, ok := refusalRuleFor(leg, ref.Cause)
	if !ok {
		return RefusalAnswer{Terminal: journal.TerminalFailed, Reason: fault.Internal,
			Detail: "unmapped refusal cause " + ref.Cause + ": " + ref.Message, Err: ServerError(500, string(fault.Internal), "internal error")}
	}
	a := RefusalAnswer{Terminal: rule.terminal, Reason: or(rule.reason, fault.Reason(ref.Cause)), Detail: or(rule.detail, ref.Message),
		NotDispatched: rule.notDispatched}
	code, msg := or(rule.code, ref.Cause), or(rule.message, ref.Message)
	switch rule.status {
	case 400:
		a.Err = p.refusal(code)
	case 429:
		a.Err = Overloaded(code, msg, ref.RetryAfter)
	case 503:
		a.Err = Unavailable(code, msg)
	default:
		a.Err = ServerError(rule.status, code, msg)
	}
	return a
}

func or[S ~string](s, dflt S) S {
	if s == "" {
		return dflt
	}
	return s
}

// refusal is the 400 for a prompt whose own prefill cannot meet the TTFT
// target: it says how to fix it.
func (p Prompt) refusal(code string) *Error {
	param := "prompt"
	if p.Chat {
		param = "messages"
	}
	budget := p.TTFT * (1 + p.Margin)
	return BadRequest(code, param, fmt.Sprintf(
		"the prompt (%d tokens) alone takes about %.3gs to prefill on the fastest engine, over the TTFT target of %gs "+
			"(slo.ttft_s × (1 + serving.admission_margin)): shorten the prompt, or raise slo.ttft_s", p.Tokens, p.OwnPrefill, budget))
}
