package router

import (
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// refused ends the call on refusal ref from leg's step (pl is its
// placement, for a prompt refusal's message): openai.Refusal's table says
// what the cause means to the client and the journal.
func (c *call) refused(leg openai.RefusalLeg, ref *sched.Refusal, pl sched.Placement) {
	a := c.refusalAnswer(leg, ref, pl)
	if a.NotDispatched {
		c.att.noteNotDispatched()
	}
	c.fail(outcome{terminal: a.Terminal, reason: a.Reason, detail: a.Detail, err: a.Err})
}

// refusalAnswer is openai.Refusal for this call's prompt.
func (c *call) refusalAnswer(leg openai.RefusalLeg, ref *sched.Refusal, pl sched.Placement) openai.RefusalAnswer {
	s := c.r.cfg
	return openai.Refusal(leg, ref, openai.Prompt{Chat: c.ex.chat, Tokens: c.sz.inputLen, OwnPrefill: pl.OwnPrefill,
		TTFT: s.SLO.TTFT, Margin: s.Serving.AdmissionMargin})
}

// noteNotDispatched marks the last failure's retry as not dispatched.
func (a *attempts) noteNotDispatched() {
	if k := len(a.failures); k > 0 {
		a.failures[k-1].RetryReason = journal.RetryNotDispatched
	}
}
