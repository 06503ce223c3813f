package router

import (
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// The terminal journal row: each stage puts what it owns on it, the
// outcome what the ending says. Only the row's values matter to its
// bytes (journal.RequestRow's field order is the wire order).

// row builds the terminal journal row.
func (c *call) row(o outcome, now float64) *journal.RequestRow {
	row := &journal.RequestRow{RID: c.rid, ClientRID: c.ex.clientRID, Arrived: c.adm.arrived,
		DurationS: now - c.adm.arrived, Terminal: o.terminal}
	c.sz.fill(row, c.adm.q.Wanted, c.facts.tokens)
	c.att.fill(row)
	c.facts.fill(row, c.adm.arrived)
	o.fill(row, c.phase)
	c.traceRow(row)
	return row
}

// fill puts the prompt's size and cache evidence on row; wanted and
// output lengths are reported only for a sized prompt.
func (s *sizing) fill(row *journal.RequestRow, wanted, tokens int) {
	row.InputLen, row.InputSized = s.inputLen, s.sized
	if s.sized {
		row.WantedLen = journal.Ptr(wanted)
		row.OutputLen = journal.Ptr(tokens)
	}
	if len(s.cacheEv.Cached) > 0 {
		row.CachedTokens = s.cacheEv.Cached
	}
}

// fill puts the attempts, their failures and the serving engines on row.
func (a *attempts) fill(row *journal.RequestRow) {
	row.Attempts, row.DecodeTries, row.AttemptFailures, row.Crossed = a.n, a.decodes, a.failures, a.crossed
	if a.prefillIID != "" {
		row.PrefillIID = journal.Ptr(a.prefillIID)
	}
	if a.decodeIID != "" {
		row.DecodeIID = journal.Ptr(a.decodeIID)
	}
}

// fill puts the waits, the price, the cache placement and the output's
// timing (from arrived, router seconds) on row.
func (f *rowFacts) fill(row *journal.RequestRow, arrived float64) {
	row.QueueWaits, row.Price, row.CachePlacement = f.queueWaits, f.price, f.cachePl
	row.QueueWait = f.queueWaits.Admission + f.queueWaits.Prefill + f.queueWaits.Decode
	row.DecodeTokensObserved = f.observed
	row.UpstreamSeconds = journal.UpstreamSeconds{Prefill: f.upstreamP, Decode: f.upstreamD}
	if f.ttft > 0 {
		row.TTFT = journal.Ptr(f.ttft)
	}
	if f.tokens > 0 {
		row.FirstByte = journal.Ptr(f.firstTok - arrived)
	}
	if f.tokens >= 2 {
		n := float64(f.tokens - 1)
		row.TPOT = journal.Ptr((f.lastTok - f.prefilledAt) / n)
		row.DecodeTPOT = journal.Ptr((f.lastTok - f.firstTok) / n)
	}
}

// fill puts the ending on row: reason, status, error, readiness, and the
// phase a cancellation came in.
func (o *outcome) fill(row *journal.RequestRow, phase fault.Phase) {
	if o.reason != "" {
		row.Reason = journal.Ptr(string(o.reason))
	}
	if o.status != 0 {
		row.Status = journal.Ptr(o.status)
	}
	if o.detail != "" {
		row.Error = journal.Ptr(o.detail)
	}
	if o.err != nil {
		row.ErrorType = journal.Ptr(o.err.Type)
		row.ErrorCode = o.err.Code
	}
	if o.readiness != "" {
		row.ReadinessReason = journal.Ptr(o.readiness)
	}
	if o.terminal == journal.TerminalCancelled {
		row.CancelledPhase = journal.Ptr(string(phase))
	}
}
