package router

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
)

// readBody reads the request body within the body deadline
// (httpguard.Options.BodyReadTimeout, never past the request's deadline) and
// the serving.max_request_bytes cap. A body still arriving after
// BodyGrace is slow: it must then hold one of its address's
// BodyReadsPerClient slots and one of the SlowBodies slots of every client
// (slowBody), else it is cut and answered 429. A body sent in one go never
// takes a slot, so a client behind the same address as a slow one (NAT, a
// proxy) is not refused for it. On failure it answers and settles the call.
func (c *call) readBody() ([]byte, bool) {
	r := c.r
	limit := int64(r.cfg.Serving.MaxRequestBytes)
	d := min(r.httpOpts.BodyReadTimeout, c.adm.deadline.Sub(r.clock.Now()))
	// The connection's own deadline: a timer could not interrupt a Read
	// blocked on a silent client. Handlers behind a ResponseWriter that
	// cannot set it (a wrapper without Unwrap) read without one, and take
	// their slot before reading, since nothing could cut them at the grace.
	rc := http.NewResponseController(c.ex.w)
	bounded := rc.SetReadDeadline(time.Now().Add(d)) == nil
	g, refused := r.watchSlow(httpguard.ClientIP(c.ex.req), rc, min(r.httpOpts.BodyGrace, d), bounded)
	if refused != httpguard.Granted {
		c.fail(r.slowRefusal(refused, g.ip))
		return nil, false
	}
	raw, err := io.ReadAll(io.LimitReader(c.ex.req.Body, limit+1))
	refused = g.finish()
	switch {
	case err != nil && refused != httpguard.Granted:
		c.fail(r.slowRefusal(refused, g.ip))
		return nil, false
	case err != nil && httpguard.IsTimeout(err):
		c.fail(outcome{terminal: journal.TerminalInvalid, detail: fmt.Sprintf("request body not received within %v", d),
			err: openai.Invalid(408, "body_read_timeout",
				fmt.Sprintf("the request body did not arrive within %v; send it in one go", d.Round(time.Millisecond)))})
		return nil, false
	case err != nil:
		c.fail(outcome{terminal: journal.TerminalCancelled})
		return nil, false
	case int64(len(raw)) > limit:
		c.fail(outcome{terminal: journal.TerminalInvalid,
			err: openai.Invalid(413, "request_too_large", "request body exceeds max_request_bytes")})
		return nil, false
	}
	c.ex.bodyRead = true
	if bounded {
		// Clear it: the server's background read, which notices a client
		// going away mid-stream, runs on the same connection.
		_ = rc.SetReadDeadline(time.Time{})
	}
	return raw, true
}

// slowRefusal is the 429 for a slow body that found no slot: its
// address's share, or every client's total, is in use.
func (r *Router) slowRefusal(why httpguard.Refusal, ip string) outcome {
	n, whose := r.httpOpts.BodyReadsPerClient, "from "+ip+" (per-client limit)"
	if why == httpguard.AllFull {
		n, whose = r.httpOpts.SlowBodies, "from all clients (server-wide limit)"
	}
	return outcome{terminal: journal.TerminalRejected, reason: fault.InflightLimit,
		detail: fmt.Sprintf("body slower than %v; %d slow request bodies %s are already being read", r.httpOpts.BodyGrace, n, whose),
		err: openai.Overloaded("client_body_limit", fmt.Sprintf("the request body did not arrive within %v and %d slow bodies %s are already "+
			"being read; send each body in one go, or use fewer connections at once", r.httpOpts.BodyGrace, n, whose), 1)}
}

// slowBody charges a body read to the slow-body slots only if it is
// still arriving when its grace ends: a timer then claims the slot, or,
// finding none, cuts the read through the connection's deadline. It
// takes no lock (the router's one mutex is Router.mu): finish either
// stops the timer before it fires or waits for its callback to end, so
// the callback's fields are read after it wrote them and its deadline
// is set before finish's caller clears it.
type slowBody struct {
	slots *httpguard.Slots
	ip    string
	o     httpguard.Options
	rc    *http.ResponseController
	timer *time.Timer
	fired chan struct{} // closed when the timer's claim has ended

	charged bool // written by claim only
	refusal httpguard.Refusal
}

// watchSlow starts the grace of one body read from ip. Without a
// connection deadline (bounded false) the slot is claimed at once, and
// a refusal is returned before anything is read.
func (r *Router) watchSlow(ip string, rc *http.ResponseController, grace time.Duration, bounded bool) (*slowBody, httpguard.Refusal) {
	g := &slowBody{slots: &r.reads, ip: ip, o: r.httpOpts, rc: rc, fired: make(chan struct{})}
	if !bounded {
		g.claim(false)
		close(g.fired)
		return g, g.finishIfRefused()
	}
	g.timer = time.AfterFunc(grace, func() {
		defer close(g.fired)
		g.claim(true)
	})
	return g, httpguard.Granted
}

// finishIfRefused ends a watch whose claim was refused.
func (g *slowBody) finishIfRefused() httpguard.Refusal {
	if g.refusal == httpguard.Granted {
		return httpguard.Granted
	}
	return g.finish()
}

// claim takes the slot; with none free, cut makes the pending read fail
// now (it is answered 429).
func (g *slowBody) claim(cut bool) {
	if g.refusal = g.slots.Claim(g.ip, g.o.BodyReadsPerClient, g.o.SlowBodies); g.refusal == httpguard.Granted {
		g.charged = true
		return
	}
	if cut {
		_ = g.rc.SetReadDeadline(time.Now())
	}
}

// finish ends the watch once the read returned, giving back the slot
// it held, and says whether the read was refused a slot. A read that
// ended before the grace stops the timer: nothing was claimed.
func (g *slowBody) finish() httpguard.Refusal {
	if g.timer != nil && g.timer.Stop() {
		return httpguard.Granted
	}
	<-g.fired
	if g.charged {
		g.charged = false
		g.slots.Done(g.ip)
	}
	return g.refusal
}

// ownBodies are the routes that read their body themselves, under their
// own deadline and the slow-body slots (readBody).
var ownBodies = map[string]bool{"/v1/completions": true, "/v1/chat/completions": true, "/v1/responses": true}

// boundBodies reads every other request's body, if it has one, before its
// handler runs: up to serving.max_request_bytes, within the body read
// timeout, on the connection's own deadline. Without it a request that
// declares a body and never sends it (GET /health with Content-Length: 10)
// holds its connection and goroutine forever: the handler answers, and the
// server then waits to discard the body with no deadline. The deadline is
// lifted before the handler, so a long answer (the dashboard's feed) is
// not cut by it.
func (r *Router) boundBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if ownBodies[req.URL.Path] || req.Body == nil || req.Body == http.NoBody ||
			(req.ContentLength == 0 && len(req.TransferEncoding) == 0) {
			next.ServeHTTP(w, req)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(r.httpOpts.BodyReadTimeout))
		limit := int64(r.cfg.Serving.MaxRequestBytes)
		raw, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
		switch {
		case err != nil:
			w.Header().Set("Connection", "close")
			openai.Invalid(http.StatusRequestTimeout, "body_read_timeout",
				fmt.Sprintf("the request body did not arrive within %v; send it in one go", r.httpOpts.BodyReadTimeout)).Write(w)
			return
		case int64(len(raw)) > limit:
			w.Header().Set("Connection", "close")
			openai.Invalid(http.StatusRequestEntityTooLarge, "request_too_large", "request body exceeds max_request_bytes").Write(w)
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		req.Body = io.NopCloser(bytes.NewReader(raw))
		next.ServeHTTP(w, req)
	})
}
