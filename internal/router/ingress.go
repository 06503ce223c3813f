package router

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// route is one served route: its Go 1.22 pattern and handler.
type route struct {
	pattern string
	handler http.Handler
}

func (r *Router) routes() {
	table := []route{
		{"POST /v1/completions", r.traced(func(w http.ResponseWriter, q *http.Request) { r.serveCompletion(w, q, false) })},
		{"POST /v1/chat/completions", r.traced(func(w http.ResponseWriter, q *http.Request) { r.serveCompletion(w, q, true) })},
		{"GET /v1/models", http.HandlerFunc(r.serveModels)},
		{"GET /v1/models/{id...}", http.HandlerFunc(r.serveModel)},
		{"GET /health", http.HandlerFunc(r.serveHealth)},
		{"GET /ready", http.HandlerFunc(r.serveReady)},
		{"GET /narwhal/state", http.HandlerFunc(r.serveState)},
		{"GET /narwhal/lifecycle", http.HandlerFunc(r.av.ServeLifecycle)},
		{"GET /narwhal/handoff", http.HandlerFunc(r.serveHandoff)},
		{"POST /narwhal/lifecycle/drain", r.admin(r.av.ServeDrain)},
		{"POST /narwhal/lifecycle/readmit", r.admin(r.av.ServeReadmit)},
		{"POST /narwhal/profiles/reload", r.admin(r.serveProfilesReload)},
		{"GET /metrics", r.metricsHandler()},
	}
	table = append(table, r.dashboardRoutes()...)
	table = append(table, r.surfaceRoutes()...)
	m, known := http.NewServeMux(), http.NewServeMux()
	for _, rt := range table {
		m.Handle(rt.pattern, rt.handler)
		known.Handle(rt.pattern, rt.handler)
	}
	// Everything else answers in OpenAI's error shape, not the mux's
	// text/plain 404 and 405.
	m.HandleFunc("/", func(w http.ResponseWriter, q *http.Request) { openai.NotRouted(w, q, known) })
	r.mux = m
	r.front = r.gate.wrap(r.boundBodies(m))
}

// serveCompletion is one original request, from arrival to its journal
// row: the stages in order (call.go names the state each owns). Every
// path out ends in exactly one terminal row (settle; settleUnsettled).
func (r *Router) serveCompletion(w http.ResponseWriter, req *http.Request, chat bool) {
	r.inflight.Add(1)
	defer r.inflight.Done()
	c := r.newCall(w, req, chat)
	defer c.settleUnsettled()
	defer c.recoverPanic()
	r.offer(c)
	// Admission (call.ex, call.adm): gates, the body, validation, a seat.
	if !c.mediaGate() {
		return
	}
	if o, bad := r.controlGate(); bad {
		c.fail(o)
		return
	}
	// The body is read before the request counts against the in-flight
	// ceiling: a client trickling its body holds only its own per-address
	// slot, never the seats everyone shares.
	raw, ok := c.readBody()
	if !ok {
		return
	}
	retained := r.retained.Add(1)
	defer r.retained.Add(-1)
	r.locked(func() { r.stats.RetainedHighWater = max(r.stats.RetainedHighWater, retained) })
	// A request that cannot succeed hears so before any overload answer
	// would invite it to retry.
	if raw, ok = c.fromResponses(raw); !ok || !c.parse(raw) {
		return
	}
	if o, bad := r.ingressGate(retained); bad {
		c.fail(o)
		return
	}
	c.recordAdmission()
	ctx, cancel := context.WithDeadline(req.Context(), c.adm.deadline)
	defer cancel()
	release, ok := c.admit(ctx)
	if !ok {
		return
	}
	defer release()
	// Sizing (call.sz): the prompt counted and tracked in the core.
	if !c.size(ctx) {
		return
	}
	// Attempts (call.att, call.facts): prefill, handoff, decode, retries,
	// until one completes or the call ends; its row is built as it settles.
	c.run(ctx)
}

// offer counts the call as offered. Arrival time and the offered count
// move together under mu, as a settle's end time and its outcome do: the
// handoff reads its run_at under mu too, so resume can tell exactly which
// journal rows it missed.
func (r *Router) offer(c *call) {
	r.locked(func() {
		c.adm.arrived = r.now()
		r.stats.Offered++
	})
}

// settleUnsettled makes sure every request ends in exactly one journal
// row: a path that returned without an outcome is a bug, recorded as one.
func (c *call) settleUnsettled() {
	if !c.facts.settled {
		c.r.log.Error("request ended without an outcome; recording it as an internal failure", "rid", c.rid)
		c.settle(outcome{terminal: journal.TerminalFailed, reason: fault.Internal, detail: "ended without an outcome"})
	}
}

// recoverPanic turns a panic while serving into a 500 and its journal
// row; net/http's abort signal is re-raised after recording the
// cancellation. It must be deferred directly, so recover sees the panic.
func (c *call) recoverPanic() {
	v := recover()
	switch {
	case v == nil:
		return
	case v == http.ErrAbortHandler:
		c.settle(outcome{terminal: journal.TerminalCancelled})
		panic(v)
	}
	c.r.log.Error("internal error serving a request", "rid", c.rid, "panic", v)
	c.fail(outcome{terminal: journal.TerminalFailed, reason: fault.Internal, status: 500,
		detail: fmt.Sprint(v), err: openai.ServerError(500, string(fault.Internal), "internal error")})
}

func (r *Router) newCall(w http.ResponseWriter, req *http.Request, chat bool) *call {
	c := &call{r: r, rid: r.ids.NewID(), phase: fault.Admission,
		ex: exchange{w: w, req: req, chat: chat, endpoint: req.URL.Path}, adm: admission{arrived: r.now()}}
	c.adm.deadline = r.clock.Now().Add(units.Seconds(r.cfg.Serving.RequestTimeoutS))
	// The client's own id comes back as X-Request-Id (OpenAI's SDKs log
	// it); the router's is always in X-Narwhal-Request-Id, and in
	// X-Request-Id too when the client sent none.
	h := w.Header()
	h.Set("X-Narwhal-Request-Id", c.rid)
	h.Set("X-Request-Id", c.rid)
	if id := req.Header.Get("X-Request-Id"); id != "" {
		c.ex.clientRID = &id
		if httpguard.Echoable(id) {
			h.Set("X-Request-Id", id)
		}
	}
	return c
}

// controlGate refuses work before the body is read when this router
// cannot place any: it is shutting down, a standby, or fenced (its lease
// lost). These answer 503 before any overload check, so a load balancer
// sends the client to the router that can serve it.
func (r *Router) controlGate() (outcome, bool) {
	if r.closing.Load() {
		return outcome{terminal: journal.TerminalRejected, reason: fault.NotReady, readiness: "shutting down",
			err: openai.Unavailable("standby", "router is shutting down")}, true
	}
	if reason := r.ha.NotControlling(); reason != "" {
		return outcome{terminal: journal.TerminalRejected, reason: fault.NotReady, readiness: reason,
			err: openai.Unavailable("standby", reason)}, true
	}
	return outcome{}, false
}

// retryAfter is the core's projection of when its queue and prefill
// backlog drain, in whole seconds (at least 1): the Retry-After of an
// overload answer, so that refused clients come back when there is room
// rather than all at once a second later.
func (r *Router) retryAfter() int {
	var n int
	r.locked(func() { n = r.core.RetryAfter(r.now()) })
	return n
}

// ingressGate refuses a read and valid request before it takes a seat:
// the in-flight ceiling, saturation, and a fleet with no engine to place
// on.
func (r *Router) ingressGate(retained int64) (outcome, bool) {
	if retained > int64(r.limit+r.cfg.Serving.QueueCapacity) {
		return outcome{terminal: journal.TerminalRejected, reason: fault.InflightLimit,
			err: openai.Overloaded(string(fault.InflightLimit), "router in-flight limit reached", r.retryAfter())}, true
	}
	if sat, lag, sizing := r.sat.Saturated(); sat {
		return outcome{terminal: journal.TerminalRejected, reason: fault.Saturated,
			detail: fmt.Sprintf("router saturated: loop lag %v, median sizing delay %v (limit slo.ttft_s/4)", lag, sizing),
			err:    openai.Overloaded(string(fault.Saturated), "router saturated; retry shortly", 1)}, true
	}
	if reason, ready := r.readiness(); !ready {
		err := openai.Unavailable("standby", reason)
		if strings.HasPrefix(reason, reasonNoEngines) {
			err = openai.Unavailable("backend_unavailable", reason)
			err.RetryAfter = r.backAfter()
		}
		return outcome{terminal: journal.TerminalRejected, reason: fault.NotReady, readiness: reason, err: err}, true
	}
	return outcome{}, false
}

// parse parses and validates the body; on failure it answers and settles
// the call.
func (c *call) parse(raw []byte) bool {
	body, err := vllm.ParseBody(raw)
	if err != nil {
		c.fail(outcome{terminal: journal.TerminalInvalid, err: openai.BadRequest("invalid_json", "", err.Error())})
		return false
	}
	q, e := openai.Validate(body, c.ex.chat, c.r.cfg.Model)
	if e != nil {
		c.fail(outcome{terminal: journal.TerminalInvalid, err: e, detail: e.Message})
		return false
	}
	c.adm.body = body
	c.adm.q = q
	return true
}

// admit takes an admission seat, waiting in the queue when one is
// configured. The returned func gives the seat back.
func (c *call) admit(ctx context.Context) (func(), bool) {
	r := c.r
	release := func() { <-r.seats }
	select {
	case r.seats <- struct{}{}:
		return release, true
	default:
	}
	if r.cfg.Serving.QueueCapacity == 0 {
		c.fail(outcome{terminal: journal.TerminalRejected, reason: fault.InflightLimit,
			err: openai.Overloaded(string(fault.InflightLimit), "router in-flight limit reached", r.retryAfter())})
		return nil, false
	}
	c.phase = fault.Queue
	start := r.now()
	t := r.clock.NewTimer(units.Seconds(r.cfg.Serving.QueueTimeoutS))
	defer t.Stop()
	defer func() { c.facts.queueWaits.Admission = r.now() - start }()
	select {
	case r.seats <- struct{}{}:
		return release, true
	case <-t.C():
		c.fail(outcome{terminal: journal.TerminalExpired, reason: fault.QueueTimeout,
			err: openai.ServerError(504, "queue_expired", "no admission seat within serving.queue_timeout_s")})
	case <-ctx.Done():
		c.ended(ctx)
	}
	return nil, false
}

// ended settles a call whose context ended: the client went away, or the
// request's deadline passed.
func (c *call) ended(ctx context.Context) {
	if (c.ex.clientGone || c.ex.req.Context().Err() != nil) && c.r.clock.Now().Before(c.adm.deadline) {
		c.settle(outcome{terminal: journal.TerminalCancelled})
		return
	}
	if c.ex.committed {
		c.ex.streamError("expired")
		c.settle(outcome{terminal: journal.TerminalExpired, reason: fault.Deadline, status: 200,
			detail: "original request deadline expired after output started"})
		return
	}
	c.fail(outcome{terminal: journal.TerminalExpired, reason: fault.Deadline,
		err: openai.ServerError(504, "request_expired", "original request deadline expired")})
}

// size counts the prompt: locally for token-id prompts, on an engine's
// /tokenize when engine.tokenize is on, else by the characters-per-token
// estimate.
func (c *call) size(ctx context.Context) bool {
	r := c.r
	began := r.clock.Now()
	n, exact, text := openai.PromptSize(c.adm.body, c.ex.chat)
	if exact {
		c.sz.tokenIDs = openai.PromptIDs(c.adm.body)
	}
	if !exact && r.cfg.Engine.Tokenize {
		var err error
		if n, err = c.tokenize(ctx); err != nil {
			e := fault.Of(err, fault.Admission)
			if ctx.Err() != nil {
				c.ended(ctx)
				return false
			}
			c.fail(outcome{terminal: journal.TerminalFailed, reason: e.Reason, err: openai.LegError(string(fault.Admission), e), detail: e.Msg})
			return false
		}
	} else if !exact {
		n = max(1, int(float64(len(text))/r.cfg.Engine.CharsPerToken))
	}
	c.sz.inputLen, c.sz.sized = n, true
	r.sat.Sized(r.clock.Now().Sub(began))
	if e := c.contextError(n, exact || r.cfg.Engine.Tokenize); e != nil {
		c.fail(outcome{terminal: journal.TerminalInvalid, err: e, detail: e.Message})
		return false
	}
	ev, _ := c.cacheEvidence() // outside r.mu: it reads the residency views
	r.locked(func() {
		c.sz.sreq = r.core.Track(c.adm.arrived, sched.Request{RID: c.rid, InputLen: n, WantedLen: c.adm.q.Wanted, CachedTokens: ev})
	})
	return true
}

// tokenize counts the prompt on a live engine (onLiveEngine: the least
// loaded, moving on a transient failure, up to serving.max_attempts).
func (c *call) tokenize(ctx context.Context) (int, error) {
	body := vllm.TokenizeBody(c.adm.body, c.r.cfg.Model, c.ex.chat)
	none := &fault.Error{Phase: fault.Admission, Reason: fault.NoEngine, Msg: "no live engine to count the prompt"}
	var n int
	_, e := c.r.onLiveEngine(ctx, none, func(ctx context.Context, cl *vllm.Client) error {
		count, ids, e := cl.TokenizeIDs(ctx, body)
		if e == nil {
			n, c.sz.tokenIDs = count, ids
		}
		return e
	})
	return n, e
}

// unanswered reports whether an engine gave no answer at all: the
// connection was refused, or dropped before any response (a dead process
// behind a reused keep-alive connection). Counting has no side effects, so
// either moves the count to the next engine within the attempt.
func unanswered(e *fault.Error) bool {
	return neverReached(e) || (e != nil && e.Reason == fault.EngineConnection)
}

// leastLoaded is the live engine outside skip with the fewest resident
// requests.
func (r *Router) leastLoaded(skip map[string]bool) (iid string) {
	r.locked(func() { iid = r.core.LeastResident(skip) })
	return iid
}

// readiness reports whether the router can place work, or the first
// reason it cannot.
func (r *Router) readiness() (string, bool) {
	if reason := r.ha.NotControlling(); reason != "" {
		return reason, false
	}
	if b := r.av.WaveBlocked(); b != "" {
		return b, false
	}
	if d := r.av.DegradedReason(); d != "" {
		return d, false
	}
	if !r.identities.Load() {
		return "engine identity validation pending", false
	}
	var missing string
	r.locked(func() { missing = r.coverageLocked() })
	if missing == "" {
		return "", true
	}
	return r.unready(missing), false
}

const reasonNoEngines = "no available engines"

func (r *Router) ready() bool {
	_, ok := r.readiness()
	return ok && !r.closing.Load()
}

// stateChanged is called after every change the handoff document records:
// it only asks takeover's writer for a write, so an ejection on a request
// goroutine never waits for the disk.
func (r *Router) stateChanged() { r.ha.Changed() }
