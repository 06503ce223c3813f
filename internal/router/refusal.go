package router

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// The core's refusals carry a cause; what each cause means to a client
// (an HTTP status, an OpenAI error type and code) and to the journal is
// decided here, in one table (docs/router.md, "Errors").

// refusalLeg is the placement step a refusal came from, as far as the
// answer differs by it.
type refusalLeg int

const (
	firstPrefill refusalLeg = iota // the request's first attempt's prefill step
	retryPrefill                   // a later attempt's: answers as firstPrefill unless it has its own row
	decodeLeg
)

type refusalKey struct {
	leg   refusalLeg
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
	reason   string // the journal's; "" is the cause itself
	// notDispatched marks the previous attempt's recorded failure: the
	// retry it scheduled never dispatched.
	notDispatched bool
}

var refusalRules = map[refusalKey]refusalRule{
	// Load that passes.
	{firstPrefill, sched.CauseQueue}:             {status: 429, terminal: journal.TerminalRefused},
	{firstPrefill, sched.CauseAggregateUnpriced}: {status: 429, terminal: journal.TerminalRefused},
	{firstPrefill, sched.CauseKVCapacity}:        {status: 429, terminal: journal.TerminalRefused},
	{firstPrefill, sched.CauseTPOT}:              {status: 429, terminal: journal.TerminalRefused},
	// The client's to fix: the reference answers 429, which every SDK
	// retries in vain (promptRefusal writes the message).
	{firstPrefill, sched.CausePrompt}: {status: 400, code: "prompt_exceeds_ttft_slo", terminal: journal.TerminalRefused},
	{firstPrefill, sched.CauseNoEngine}: {status: 503, code: "no_schedulable_engines", message: "no engine can take this request now",
		terminal: journal.TerminalFailed, reason: journal.ReasonNoEngine},
	{retryPrefill, sched.CauseNoEngine}: {status: 503, code: "backend_unavailable", message: "no engine is left to retry on",
		terminal: journal.TerminalFailed, reason: journal.ReasonNoEngine, notDispatched: true},
	// Seats: the answer once waiting for one ran out (the decode leg's
	// wait ends as an expired KV handoff instead, which may be retried).
	{firstPrefill, sched.CauseSeats}: {status: 504, code: "expired", message: "no prefill seat freed within the queue timeout",
		detail: "no prefill seat within serving.queue_timeout_s", terminal: journal.TerminalExpired, reason: journal.ReasonQueueTimeout},
	{decodeLeg, sched.CauseNoEngine}: {status: 503, code: "backend_unavailable", message: "no engine can take the decode leg now",
		terminal: journal.TerminalFailed, reason: journal.ReasonNoEngine},
}

// refusalRuleFor is the table's row for a refusal; false when it has none
// (a cause the router does not know: its bug, answered 500).
func refusalRuleFor(leg refusalLeg, cause string) (refusalRule, bool) {
	rule, ok := refusalRules[refusalKey{leg, cause}]
	if !ok && leg == retryPrefill {
		rule, ok = refusalRules[refusalKey{firstPrefill, cause}]
	}
	return rule, ok
}

// refused ends the call on refusal ref from leg's step (pl is its
// placement, for a prompt refusal's message).
func (c *call) refused(leg refusalLeg, ref *sched.Refusal, pl sched.Placement) {
	o, rule := c.refusalOutcome(leg, ref, pl)
	if rule.notDispatched {
		c.noteNotDispatched()
	}
	c.fail(o)
}

// noteNotDispatched marks the last failure's retry as not dispatched.
func (c *call) noteNotDispatched() {
	if k := len(c.failures); k > 0 {
		c.failures[k-1].RetryReason = "not_dispatched"
	}
}

// refusalOutcome is the call's outcome on refusal ref, and the row that
// gave it.
func (c *call) refusalOutcome(leg refusalLeg, ref *sched.Refusal, pl sched.Placement) (outcome, refusalRule) {
	rule, ok := refusalRuleFor(leg, ref.Cause)
	if !ok {
		return outcome{terminal: journal.TerminalFailed, reason: journal.ReasonInternal, detail: "unmapped refusal cause " + ref.Cause + ": " + ref.Message,
			err: openai.ServerError(500, journal.ReasonInternal, "internal error")}, rule
	}
	o := outcome{terminal: rule.terminal, reason: or(rule.reason, ref.Cause), detail: or(rule.detail, ref.Message)}
	code, msg := or(rule.code, ref.Cause), or(rule.message, ref.Message)
	switch rule.status {
	case 400:
		o.err = c.promptRefusal(code, pl)
	case 429:
		o.err = openai.Overloaded(code, msg, ref.RetryAfter)
	case 503:
		o.err = openai.Unavailable(code, msg)
	default:
		o.err = openai.ServerError(rule.status, code, msg)
	}
	return o, rule
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// promptRefusal is the 400 for a prompt whose own prefill cannot meet the
// TTFT target: it says how to fix it.
func (c *call) promptRefusal(code string, pl sched.Placement) *openai.Error {
	param := "prompt"
	if c.chat {
		param = "messages"
	}
	s := c.r.cfg
	budget := s.SLO.TTFT * (1 + s.Serving.AdmissionMargin)
	return openai.BadRequest(code, param, fmt.Sprintf(
		"the prompt (%d tokens) alone takes about %.3gs to prefill on the fastest engine, over the TTFT target of %gs "+
			"(slo.ttft_s × (1 + serving.admission_margin)): shorten the prompt, or raise slo.ttft_s", c.inputLen, pl.OwnPrefill, budget))
}
