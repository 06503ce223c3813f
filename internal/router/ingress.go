package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func (r *Router) routes() {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, q *http.Request) { r.serveCompletion(w, q, false) })
	m.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, q *http.Request) { r.serveCompletion(w, q, true) })
	m.HandleFunc("GET /v1/models", r.serveModels)
	m.HandleFunc("GET /health", r.serveHealth)
	m.HandleFunc("GET /ready", r.serveReady)
	m.HandleFunc("GET /narwhal/state", r.serveState)
	m.HandleFunc("GET /narwhal/lifecycle", r.serveLifecycle)
	m.HandleFunc("GET /narwhal/handoff", r.serveHandoff)
	m.HandleFunc("POST /narwhal/lifecycle/drain", r.admin(r.serveDrain))
	m.HandleFunc("POST /narwhal/lifecycle/readmit", r.admin(r.serveReadmit))
	m.Handle("GET /metrics", r.metricsHandler())
	r.mux = m
}

// serveCompletion is one original request, from arrival to its journal row.
func (r *Router) serveCompletion(w http.ResponseWriter, req *http.Request, chat bool) {
	r.inflight.Add(1)
	defer r.inflight.Done()
	retained := r.retained.Add(1)
	defer r.retained.Add(-1)

	c := r.newCall(w, req, chat)
	defer func() {
		// Every request ends in exactly one journal row: a path that
		// returned without an outcome is a bug, recorded as one.
		if !c.settled {
			r.log.Error("request ended without an outcome; recording it as an internal failure", "rid", c.rid)
			c.settle(outcome{terminal: journal.TerminalFailed, reason: journal.ReasonInternal, detail: "ended without an outcome"})
		}
	}()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				c.settle(outcome{terminal: journal.TerminalCancelled})
				panic(v)
			}
			r.log.Error("internal error serving a request", "rid", c.rid, "panic", v)
			if !c.committed {
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
			c.settle(outcome{terminal: journal.TerminalFailed, reason: journal.ReasonInternal, status: 500,
				detail: fmt.Sprint(v)})
		}
	}()
	r.mu.Lock()
	r.stats.offered++
	r.stats.retainedHighWater = max(r.stats.retainedHighWater, retained)
	r.mu.Unlock()

	if o, bad := r.ingressGate(retained); bad {
		c.fail(o)
		return
	}
	ctx, cancel := context.WithDeadline(req.Context(), c.deadline)
	defer cancel()
	if !c.readBody() {
		return
	}
	release, ok := c.admit(ctx)
	if !ok {
		return
	}
	defer release()
	if !c.size(ctx) {
		return
	}
	c.run(ctx)
}

func (r *Router) newCall(w http.ResponseWriter, req *http.Request, chat bool) *call {
	c := &call{r: r, w: w, req: req, rid: r.ids.NewID(), chat: chat, endpoint: req.URL.Path,
		arrived: r.now(), phase: "admission"}
	c.deadline = r.clock.Now().Add(seconds(r.cfg.Serving.RequestTimeoutS))
	if id := req.Header.Get("X-Request-Id"); id != "" {
		c.clientRID = &id
	}
	w.Header().Set("X-Request-Id", c.rid)
	return c
}

// ingressGate refuses work before the body is read: shutdown, the
// in-flight ceiling, and a fleet with no engine to place on.
func (r *Router) ingressGate(retained int64) (outcome, bool) {
	switch {
	case r.closing.Load():
		return outcome{terminal: journal.TerminalRejected, reason: journal.ReasonNotReady, readiness: "shutting down",
			err: typed(503, "standby", "router is shutting down", 1)}, true
	case retained > int64(r.limit+r.cfg.Serving.QueueCapacity):
		return outcome{terminal: journal.TerminalRejected, reason: journal.ReasonInflightLimit,
			err: &apiError{Status: 429, Type: "server_overloaded_error", Message: "router in-flight limit reached", RetryAfter: 1}}, true
	}
	if sat, lag, sizing := r.saturated(); sat {
		return outcome{terminal: journal.TerminalRejected, reason: journal.ReasonSaturated,
			detail: fmt.Sprintf("router saturated: loop lag %v, median sizing delay %v (limit slo.ttft_s/4)", lag, sizing),
			err:    &apiError{Status: 429, Type: "server_overloaded_error", Message: "router saturated; retry shortly", RetryAfter: 1}}, true
	}
	if reason, ready := r.readiness(); !ready {
		typ := "standby"
		if strings.HasPrefix(reason, reasonNoEngines) {
			typ = "backend_unavailable"
		}
		return outcome{terminal: journal.TerminalRejected, reason: journal.ReasonNotReady, readiness: reason,
			err: typed(503, typ, reason, 1)}, true
	}
	return outcome{}, false
}

// readBody reads and validates the request body; on failure it answers
// and settles the call.
func (c *call) readBody() bool {
	limit := int64(c.r.cfg.Serving.MaxRequestBytes)
	raw, err := io.ReadAll(io.LimitReader(c.req.Body, limit+1))
	if err != nil {
		c.fail(outcome{terminal: journal.TerminalCancelled, detail: ""})
		return false
	}
	if int64(len(raw)) > limit {
		c.fail(outcome{terminal: journal.TerminalInvalid,
			err: &apiError{Status: 413, Type: "request_too_large", Message: "request body exceeds max_request_bytes"}})
		return false
	}
	body, err := vllm.ParseBody(raw)
	if err != nil {
		c.fail(outcome{terminal: journal.TerminalInvalid, err: invalidRequest(err.Error(), "")})
		return false
	}
	if e := c.validate(body); e != nil {
		c.fail(outcome{terminal: journal.TerminalInvalid, err: e, detail: e.Message})
		return false
	}
	c.body = body
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
		c.fail(outcome{terminal: journal.TerminalRejected, reason: journal.ReasonInflightLimit,
			err: &apiError{Status: 429, Type: "server_overloaded_error", Message: "router in-flight limit reached", RetryAfter: 1}})
		return nil, false
	}
	c.phase = "queue"
	start := r.now()
	t := r.clock.NewTimer(seconds(r.cfg.Serving.QueueTimeoutS))
	defer t.Stop()
	defer func() { c.queueWaits.Admission = r.now() - start }()
	select {
	case r.seats <- struct{}{}:
		return release, true
	case <-t.C():
		c.fail(outcome{terminal: journal.TerminalExpired, reason: journal.ReasonQueueTimeout,
			err: &apiError{Status: 504, Type: "queue_expired", Message: "no admission seat within serving.queue_timeout_s"}})
	case <-ctx.Done():
		c.ended(ctx)
	}
	return nil, false
}

// ended settles a call whose context ended: the client went away, or the
// request's deadline passed.
func (c *call) ended(ctx context.Context) {
	if (c.clientGone || c.req.Context().Err() != nil) && c.r.clock.Now().Before(c.deadline) {
		c.settle(outcome{terminal: journal.TerminalCancelled})
		return
	}
	if c.committed {
		c.streamError("expired")
		c.settle(outcome{terminal: journal.TerminalExpired, reason: journal.ReasonDeadline, status: 200,
			detail: "original request deadline expired after output started"})
		return
	}
	c.fail(outcome{terminal: journal.TerminalExpired, reason: journal.ReasonDeadline,
		err: &apiError{Status: 504, Type: "request_expired", Message: "original request deadline expired"}})
}

// size counts the prompt: locally for token-id prompts, on an engine's
// /tokenize when engine.tokenize is on, else by the characters-per-token
// estimate.
func (c *call) size(ctx context.Context) bool {
	r := c.r
	began := r.clock.Now()
	n, exact, text := c.localSize()
	if !exact && r.cfg.Engine.Tokenize {
		var e *vllm.Error
		n, e = c.tokenize(ctx)
		if e != nil {
			if ctx.Err() != nil {
				c.ended(ctx)
				return false
			}
			c.fail(outcome{terminal: journal.TerminalFailed, reason: e.Reason, err: upstream("admission", e.Timeout), detail: e.Msg})
			return false
		}
	} else if !exact {
		n = max(1, int(float64(len(text))/r.cfg.Engine.CharsPerToken))
	}
	c.inputLen, c.sized = n, true
	r.sized(r.clock.Now().Sub(began))
	r.mu.Lock()
	c.sreq = r.core.Track(c.arrived, sched.Request{RID: c.rid, InputLen: n, WantedLen: c.wanted})
	r.mu.Unlock()
	return true
}

// tokenize asks the live engine with the fewest resident requests, moving
// to another engine on a transient failure, up to serving.max_attempts.
func (c *call) tokenize(ctx context.Context) (int, *vllm.Error) {
	r := c.r
	body := c.tokenizeBody()
	tried := map[string]bool{}
	var last *vllm.Error
	for range r.cfg.Serving.MaxAttempts {
		iid := r.leastLoaded(tried)
		if iid == "" {
			break
		}
		tried[iid] = true
		tctx, cancel := context.WithTimeout(ctx, seconds(r.cfg.Engine.TokenizeTimeoutS))
		n, e := r.engines[iid].client.Tokenize(tctx, body)
		cancel()
		if e == nil {
			return n, nil
		}
		last = e
		if !e.Transient() || ctx.Err() != nil {
			break
		}
	}
	if last == nil {
		last = &vllm.Error{Phase: "admission", Reason: journal.ReasonNoEngine, Msg: "no live engine to count the prompt"}
	}
	return 0, last
}

// leastLoaded is the live engine outside skip with the fewest resident
// requests.
func (r *Router) leastLoaded(skip map[string]bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.core.LeastResident(skip)
}

// tokenizeBody is the /tokenize request for this call's prompt.
func (c *call) tokenizeBody() []byte {
	out := map[string]json.RawMessage{"model": mustRaw(c.r.cfg.Model)}
	keys := []string{"prompt", "add_special_tokens"}
	if c.chat {
		keys = []string{"messages", "tools", "chat_template", "chat_template_kwargs", "continue_final_message",
			"add_generation_prompt", "add_special_tokens"}
	}
	for _, k := range keys {
		if v, ok := c.body[k]; ok {
			out[k] = v
		}
	}
	b, _ := json.Marshal(out)
	return b
}

func mustRaw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// localSize counts a token-id prompt exactly and otherwise returns the
// text the estimate would use.
func (c *call) localSize() (n int, exact bool, text string) {
	if c.chat {
		var msgs []struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(c.body["messages"], &msgs)
		var b bytes.Buffer
		for _, m := range msgs {
			b.WriteString(contentText(m.Content))
		}
		return 0, false, b.String()
	}
	var ids []int
	if err := json.Unmarshal(c.body["prompt"], &ids); err == nil && len(ids) > 0 {
		return len(ids), true, ""
	}
	var s string
	if json.Unmarshal(c.body["prompt"], &s) == nil {
		return 0, false, s
	}
	var batch []string
	_ = json.Unmarshal(c.body["prompt"], &batch)
	var b bytes.Buffer
	for _, p := range batch {
		b.WriteString(p)
	}
	return 0, false, b.String()
}

// contentText is the text of a chat message's content: a string, or the
// text parts of a list.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b bytes.Buffer
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// readiness reports whether the router can place work, or the first
// reason it cannot.
func (r *Router) readiness() (string, bool) {
	if !r.controlsFleet() || r.ha.blockedReason() != "" {
		return r.notControlling(), false
	}
	if b := r.waveBlocked(); b != "" {
		return b, false
	}
	if d := r.degradedReason(); d != "" {
		return d, false
	}
	if !r.identities.Load() {
		return "engine identity validation pending", false
	}
	r.mu.Lock()
	missing := r.coverageLocked()
	r.mu.Unlock()
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

// stateChanged is called after every change the handoff document records.
func (r *Router) stateChanged() { _ = r.writeHandoff() }
