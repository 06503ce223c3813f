package openai

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// What each refusal cause of the core means to a client and the journal:
// the table's answers, a later attempt answering as the first unless it
// has its own row, and a cause without a row answered as the router's bug.
func TestRefusalAnswers(t *testing.T) {
	p := Prompt{Tokens: 5000, TTFT: 2, Margin: 0.1}
	cases := []struct {
		leg        RefusalLeg
		cause      string
		retryAfter int
		status     int
		typ, code  string
		header     int // Retry-After
		terminal   string
		reason     string
		param      string
	}{
		{FirstPrefill, sched.CauseQueue, 3, 429, TypeRateLimit, "queue", 3, journal.TerminalRefused, journal.CauseQueue, ""},
		{FirstPrefill, sched.CauseAggregateUnpriced, 1, 429, TypeRateLimit, "aggregate_unpriced", 1, journal.TerminalRefused, journal.CauseAggregateUnpriced, ""},
		{FirstPrefill, sched.CauseKVCapacity, 1, 429, TypeRateLimit, "kv_capacity", 1, journal.TerminalRefused, journal.CauseKVCapacity, ""},
		{RetryPrefill, sched.CauseTPOT, 0, 429, TypeRateLimit, "tpot", 1, journal.TerminalRefused, journal.CauseTPOT, ""},
		{FirstPrefill, sched.CausePrompt, 0, 400, TypeInvalid, "prompt_exceeds_ttft_slo", 0, journal.TerminalRefused, journal.CausePrompt, "prompt"},
		{FirstPrefill, sched.CauseNoEngine, 1, 503, TypeUnavailable, "no_schedulable_engines", 1, journal.TerminalFailed, string(fault.NoEngine), ""},
		{RetryPrefill, sched.CauseNoEngine, 1, 503, TypeUnavailable, "backend_unavailable", 1, journal.TerminalFailed, string(fault.NoEngine), ""},
		{DecodeLeg, sched.CauseNoEngine, 1, 503, TypeUnavailable, "backend_unavailable", 1, journal.TerminalFailed, string(fault.NoEngine), ""},
		{RetryPrefill, sched.CauseSeats, 0, 504, TypeServer, "expired", 0, journal.TerminalExpired, string(fault.QueueTimeout), ""},
		{FirstPrefill, sched.CauseUntracked, 0, 500, TypeServer, string(fault.Internal), 0, journal.TerminalFailed, string(fault.Internal), ""},
	}
	for _, tc := range cases {
		p.OwnPrefill = 3
		o := Refusal(tc.leg, &sched.Refusal{Cause: tc.cause, RetryAfter: tc.retryAfter, Message: "m"}, p)
		e := o.Err
		if e == nil || e.Status != tc.status || e.Type != tc.typ || e.Code == nil || *e.Code != tc.code || e.RetryAfter != tc.header ||
			(tc.param != "") != (e.Param != nil) || (e.Param != nil && *e.Param != tc.param) {
			t.Errorf("leg %d cause %s: answer %+v, want %d %s %s Retry-After %d param %q", tc.leg, tc.cause, e, tc.status, tc.typ, tc.code, tc.header, tc.param)
		}
		if o.Terminal != tc.terminal || string(o.Reason) != tc.reason {
			t.Errorf("leg %d cause %s: journal %s/%s, want %s/%s", tc.leg, tc.cause, o.Terminal, o.Reason, tc.terminal, tc.reason)
		}
	}
}

// Every cause the core can refuse a prefill step with has a row, so a new
// cause cannot reach clients as a 500 unnoticed.
func TestEveryRefusalCauseHasARow(t *testing.T) {
	for _, cause := range sched.Causes() {
		_, ok := refusalRuleFor(FirstPrefill, cause)
		if ok == (cause == sched.CauseUntracked) {
			t.Errorf("cause %s: row %v; every cause but untracked (a router bug) needs one", cause, ok)
		}
	}
}
