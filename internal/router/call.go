package router

import (
	"net/http"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/residency"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// call is one original completion request from arrival to its journal row.
type call struct {
	r         *Router
	w         http.ResponseWriter
	req       *http.Request
	rid       string
	clientRID *string
	chat      bool
	endpoint  string
	arrived   float64 // router seconds
	deadline  time.Time
	phase     fault.Phase // where it is now, for cancellation: admission, queue, backoff, prefill, decode

	bodyRead bool // the whole request body was read
	body     vllm.Body
	q        openai.Request // what the router reads from the valid body
	inputLen int
	sized    bool
	sreq     *sched.Request

	attempts, decodeAttempts int
	failures                 []journal.AttemptFailure
	prefillIID, decodeIID    string
	crossed                  *bool
	price                    *journal.Price
	queueWaits               journal.QueueWaits
	queue                    *queueWait           // while waiting in the core's deadline queue (queue.go)
	replaced                 map[fault.Phase]bool // the phases the router placed again itself (failover.go)

	ttft, prefilledAt, firstTok, lastTok float64
	tokens, observed                     int
	committed                            bool // response status and headers went out
	clientGone                           bool // a write to the client failed
	reserved                             bool // holds a retry credit not yet spent
	failedOver                           bool // a leg moved to another engine (failover.go)
	upstreamP, upstreamD                 float64
	settled                              bool

	tokenIDs []int                   // the prompt's token ids when known exactly (cache.go)
	cacheEv  residency.Evidence      // cached tokens per engine with known residency
	hashes   residency.Hashes        // the prompt's block hashes, computed once
	cachePl  *journal.CachePlacement // the warm placement's evidence; nil when priced cold

	resp *responses // the Responses API call this chat call serves (responses.go); nil otherwise
}

// outcome is how a call ends.
type outcome struct {
	terminal  string
	reason    fault.Reason // "" for null
	status    int          // HTTP status sent; 0 for null (a cancellation)
	err       *openai.Error
	detail    string // journal error text (may name engines); "" for null
	readiness string
}

// fail answers the client (unless the response is already committed) and
// settles the call.
func (c *call) fail(o outcome) {
	if o.err != nil && !c.committed {
		if !c.bodyRead {
			// Not Go's default of draining the unread body first: a
			// trickling client would hold the answer back for as long as
			// it trickles.
			c.w.Header().Set("Connection", "close")
		}
		o.err.Write(c.w)
		c.committed = true
		o.status = o.err.Status
	}
	c.settle(o)
}

// settle writes the call's one terminal journal row and counts it. It runs
// exactly once per call; later calls are ignored.
func (c *call) settle(o outcome) {
	if c.settled {
		return
	}
	c.settled = true
	r := c.r
	var row *journal.RequestRow
	var met bool
	var credits float64
	r.locked(func() { row, met, credits = c.settleLocked(o) })
	r.observe(o, row, met, credits)
	if r.journal != nil {
		if err := r.journal.Request(row); err != nil {
			r.log.Error("journal write failed; the request's terminal row is lost", "rid", c.rid, "err", err)
		}
	}
}

// settleLocked builds the terminal row and counts it, frees the call's
// seat in the core, and returns the row, whether it met the SLO, and the
// retry credits left.
func (c *call) settleLocked(o outcome) (*journal.RequestRow, bool, float64) {
	r := c.r
	now := r.now() // under mu with the counts: see offer
	row := c.row(o, now)
	r.stats.Count(o.terminal, string(o.reason))
	if !c.sized {
		r.stats.UnsizedOffered++
	}
	met := r.sloMet(row)
	if met {
		r.stats.SLOMet++
	}
	if o.terminal == journal.TerminalCompleted {
		if c.attempts > 1 {
			r.stats.ServedAfterRetry++
		}
		r.stats.Credits = min(float64(r.cfg.Serving.RetryBudget), r.stats.Credits+r.cfg.Serving.RetryReplenish)
	}
	if c.reserved {
		r.stats.Credits++ // the retry never dispatched: give the credit back
	}
	r.stats.DecodeTokens += c.observed
	r.stats.UpstreamPrefill += c.upstreamP
	r.stats.UpstreamDecode += c.upstreamD
	if c.sreq != nil {
		r.core.Finished(now, c.rid)
		r.seatFreedLocked()
	}
	return row, met, r.stats.Credits
}

// sloMet applies the one SLO rule (fleet.SLO.Met) to a terminal row: a
// completed request's stream ended with [DONE], so its output was
// delivered in full.
func (r *Router) sloMet(row *journal.RequestRow) bool {
	return r.cfg.SLO.Met(row.Terminal == journal.TerminalCompleted, row.TTFT, row.TPOT)
}

// row builds the terminal journal row.
func (c *call) row(o outcome, now float64) *journal.RequestRow {
	row := &journal.RequestRow{
		RID: c.rid, ClientRID: c.clientRID, Arrived: c.arrived,
		InputLen: c.inputLen, InputSized: c.sized,
		QueueWaits: c.queueWaits, Price: c.price, DurationS: now - c.arrived,
		Attempts: c.attempts, DecodeTries: c.decodeAttempts, AttemptFailures: c.failures,
		DecodeTokensObserved: c.observed,
		UpstreamSeconds:      journal.UpstreamSeconds{Prefill: c.upstreamP, Decode: c.upstreamD},
		Crossed:              c.crossed, Terminal: o.terminal,
	}
	row.QueueWait = c.queueWaits.Admission + c.queueWaits.Prefill + c.queueWaits.Decode
	c.cacheRow(row)
	if c.sized {
		row.WantedLen = journal.Ptr(c.q.Wanted)
		row.OutputLen = journal.Ptr(c.tokens)
	}
	if c.prefillIID != "" {
		row.PrefillIID = journal.Ptr(c.prefillIID)
	}
	if c.decodeIID != "" {
		row.DecodeIID = journal.Ptr(c.decodeIID)
	}
	if c.ttft > 0 {
		row.TTFT = journal.Ptr(c.ttft)
	}
	if c.tokens > 0 {
		row.FirstByte = journal.Ptr(c.firstTok - c.arrived)
	}
	if c.tokens >= 2 {
		n := float64(c.tokens - 1)
		row.TPOT = journal.Ptr((c.lastTok - c.prefilledAt) / n)
		row.DecodeTPOT = journal.Ptr((c.lastTok - c.firstTok) / n)
	}
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
		row.CancelledPhase = journal.Ptr(string(c.phase))
	}
	c.traceRow(row)
	return row
}
