package router

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// What each refusal cause of the core means to a client and the journal:
// the table's answers, a later attempt answering as the first unless it
// has its own row, and a cause without a row answered as the router's bug.
func TestRefusalAnswers(t *testing.T) {
	cfg := fleet.Defaults()
	c := &call{r: &Router{cfg: &cfg}, inputLen: 5000}
	cases := []struct {
		leg        refusalLeg
		cause      string
		retryAfter int
		status     int
		typ, code  string
		header     int // Retry-After
		terminal   string
		reason     string
		param      string
	}{
		{firstPrefill, sched.CauseQueue, 3, 429, openai.TypeRateLimit, "queue", 3, journal.TerminalRefused, journal.CauseQueue, ""},
		{firstPrefill, sched.CauseAggregateUnpriced, 1, 429, openai.TypeRateLimit, "aggregate_unpriced", 1, journal.TerminalRefused, journal.CauseAggregateUnpriced, ""},
		{firstPrefill, sched.CauseKVCapacity, 1, 429, openai.TypeRateLimit, "kv_capacity", 1, journal.TerminalRefused, journal.CauseKVCapacity, ""},
		{retryPrefill, sched.CauseTPOT, 0, 429, openai.TypeRateLimit, "tpot", 1, journal.TerminalRefused, journal.CauseTPOT, ""},
		{firstPrefill, sched.CausePrompt, 0, 400, openai.TypeInvalid, "prompt_exceeds_ttft_slo", 0, journal.TerminalRefused, journal.CausePrompt, "prompt"},
		{firstPrefill, sched.CauseNoEngine, 1, 503, openai.TypeUnavailable, "no_schedulable_engines", 1, journal.TerminalFailed, journal.ReasonNoEngine, ""},
		{retryPrefill, sched.CauseNoEngine, 1, 503, openai.TypeUnavailable, "backend_unavailable", 1, journal.TerminalFailed, journal.ReasonNoEngine, ""},
		{decodeLeg, sched.CauseNoEngine, 1, 503, openai.TypeUnavailable, "backend_unavailable", 1, journal.TerminalFailed, journal.ReasonNoEngine, ""},
		{retryPrefill, sched.CauseSeats, 0, 504, openai.TypeServer, "expired", 0, journal.TerminalExpired, journal.ReasonQueueTimeout, ""},
		{firstPrefill, sched.CauseUntracked, 0, 500, openai.TypeServer, journal.ReasonInternal, 0, journal.TerminalFailed, journal.ReasonInternal, ""},
	}
	for _, tc := range cases {
		o, _ := c.refusalOutcome(tc.leg, &sched.Refusal{Cause: tc.cause, RetryAfter: tc.retryAfter, Message: "m"}, sched.Placement{OwnPrefill: 3})
		e := o.err
		if e == nil || e.Status != tc.status || e.Type != tc.typ || e.Code == nil || *e.Code != tc.code || e.RetryAfter != tc.header ||
			(tc.param != "") != (e.Param != nil) || (e.Param != nil && *e.Param != tc.param) {
			t.Errorf("leg %d cause %s: answer %+v, want %d %s %s Retry-After %d param %q", tc.leg, tc.cause, e, tc.status, tc.typ, tc.code, tc.header, tc.param)
		}
		if o.terminal != tc.terminal || o.reason != tc.reason {
			t.Errorf("leg %d cause %s: journal %s/%s, want %s/%s", tc.leg, tc.cause, o.terminal, o.reason, tc.terminal, tc.reason)
		}
	}
}

// Every cause the core can refuse a prefill step with has a row, so a new
// cause cannot reach clients as a 500 unnoticed.
func TestEveryRefusalCauseHasARow(t *testing.T) {
	for _, cause := range sched.Causes() {
		_, ok := refusalRuleFor(firstPrefill, cause)
		if ok == (cause == sched.CauseUntracked) {
			t.Errorf("cause %s: row %v; every cause but untracked (a router bug) needs one", cause, ok)
		}
	}
}
