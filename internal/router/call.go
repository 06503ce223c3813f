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

// call is one original completion request from arrival to its journal
// row. As net/http splits a request's state between the connection, the
// Request and the response, a call's state is split by the stage that
// owns it; serveCompletion runs the stages in order, each writing its own
// part and reading those before it:
//
//	exchange   the client's side: request, response writer, what went out
//	admission  the read, valid body and the request's deadline
//	sizing     the prompt's size, its token ids and cache evidence, its seat in the core
//	attempts   the prefill/decode attempts: engines, failures, retry credit
//	rowFacts   what the terminal journal row reports: waits, price, timings, tokens
type call struct {
	r     *Router
	rid   string
	phase fault.Phase // where it is now, for cancellation: admission, queue, backoff, prefill, decode
	ex    exchange
	adm   admission
	sz    sizing
	att   attempts
	facts rowFacts
}

// exchange is the client's side of a call: what it sent and what it has
// been answered so far.
type exchange struct {
	w          http.ResponseWriter
	req        *http.Request
	clientRID  *string // the client's X-Request-Id
	chat       bool
	endpoint   string     // the engines' route the legs run on
	resp       *responses // the Responses API call this chat call serves (responses.go); nil otherwise
	bodyRead   bool       // the whole request body was read
	committed  bool       // response status and headers went out
	clientGone bool       // a write to the client failed
}

// admission is what the admission stage establishes: when the request
// arrived, until when it may run, and its valid body.
type admission struct {
	arrived  float64   // router seconds
	deadline time.Time // serving.request_timeout_s after arrival
	body     vllm.Body
	q        openai.Request // what the router reads from the valid body
}

// sizing is the prompt as the sizing stage counted it, and the call's
// handle in the core once it is tracked.
type sizing struct {
	inputLen int
	sized    bool
	sreq     *sched.Request
	tokenIDs []int              // the prompt's token ids when known exactly (cache.go)
	cacheEv  residency.Evidence // cached tokens per engine with known residency
	hashes   residency.Hashes   // the prompt's block hashes, computed once
}

// attempts is the state of the attempt loop (run.go): which engines the
// current attempt uses, what failed before, and the retry credit held.
type attempts struct {
	n, decodes            int // attempts made; decode legs dispatched
	failures              []journal.AttemptFailure
	prefillIID, decodeIID string
	crossed               *bool
	queue                 *queueWait           // while waiting in the core's deadline queue (queue.go)
	replaced              map[fault.Phase]bool // the phases the router placed again itself (failover.go)
	reserved              bool                 // holds a retry credit not yet spent
	failedOver            bool                 // a leg moved to another engine (failover.go)
}

// rowFacts are the measurements the terminal row reports, gathered across
// the stages: queue waits, the placement's price and cache evidence, the
// output's timing and the upstream seconds.
type rowFacts struct {
	queueWaits                           journal.QueueWaits
	price                                *journal.Price
	cachePl                              *journal.CachePlacement // the warm placement's evidence; nil when priced cold
	ttft, prefilledAt, firstTok, lastTok float64
	tokens, observed                     int
	upstreamP, upstreamD                 float64
	settled                              bool
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
	c.ex.answer(&o)
	c.settle(o)
}

// answer writes o's error to the client unless the response is already
// committed, and records the status sent.
func (x *exchange) answer(o *outcome) {
	if o.err == nil || x.committed {
		return
	}
	if !x.bodyRead {
		// Not Go's default of draining the unread body first: a
		// trickling client would hold the answer back for as long as it
		// trickles.
		x.w.Header().Set("Connection", "close")
	}
	o.err.Write(x.w)
	x.committed = true
	o.status = o.err.Status
}

// settle writes the call's one terminal journal row and counts it. It runs
// exactly once per call; later calls are ignored.
func (c *call) settle(o outcome) {
	if c.facts.settled {
		return
	}
	c.facts.settled = true
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
	if !c.sz.sized {
		r.stats.UnsizedOffered++
	}
	met := r.sloMet(row)
	if met {
		r.stats.SLOMet++
	}
	if o.terminal == journal.TerminalCompleted {
		if c.att.n > 1 {
			r.stats.ServedAfterRetry++
		}
		r.stats.Credits = min(float64(r.cfg.Serving.RetryBudget), r.stats.Credits+r.cfg.Serving.RetryReplenish)
	}
	if c.att.reserved {
		r.stats.Credits++ // the retry never dispatched: give the credit back
	}
	r.stats.DecodeTokens += c.facts.observed
	r.stats.UpstreamPrefill += c.facts.upstreamP
	r.stats.UpstreamDecode += c.facts.upstreamD
	if c.sz.sreq != nil {
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

// clearEngines forgets the engines of an attempt that ended: the next one
// places both legs afresh.
func (a *attempts) clearEngines() { a.prefillIID, a.decodeIID, a.crossed = "", "", nil }

// tokensAt records n output tokens arriving at now (router seconds).
func (f *rowFacts) tokensAt(now float64, n int) {
	if f.tokens == 0 {
		f.firstTok = now
	}
	f.tokens += n
	f.observed += n
	f.lastTok = now
}

// discardOutput forgets a failed attempt's partial output: the row's
// output and timing are the serving attempt's (observed keeps counting
// every attempt's tokens).
func (f *rowFacts) discardOutput() { f.tokens, f.firstTok, f.lastTok = 0, 0, 0 }
