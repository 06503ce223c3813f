package router

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
)

// readBody reads the request body within the body deadline
// (httpguard.Options.BodyReadTimeout, never past the request's deadline) and
// the serving.max_request_bytes cap, holding one of its address's
// httpguard.Options.BodyReadsPerClient slots meanwhile. On failure it answers
// and settles the call.
func (c *call) readBody() ([]byte, bool) {
	r := c.r
	ip := httpguard.ClientIP(c.req)
	if !r.reads.Take(ip, r.httpOpts.BodyReadsPerClient) {
		c.fail(outcome{terminal: journal.TerminalRejected, reason: journal.ReasonInflightLimit,
			detail: fmt.Sprintf("%d request bodies from %s are already being read (per-client limit)", r.httpOpts.BodyReadsPerClient, ip),
			err: openai.Overloaded("client_body_limit", "too many requests from this address are still sending their bodies; "+
				"send each body promptly, or use fewer connections at once", 1)})
		return nil, false
	}
	defer r.reads.Done(ip)
	limit := int64(r.cfg.Serving.MaxRequestBytes)
	d := min(r.httpOpts.BodyReadTimeout, c.deadline.Sub(r.clock.Now()))
	// The connection's own deadline: a timer could not interrupt a Read
	// blocked on a silent client. Handlers behind a ResponseWriter that
	// cannot set it (a wrapper without Unwrap) read without one.
	rc := http.NewResponseController(c.w)
	bounded := rc.SetReadDeadline(time.Now().Add(d)) == nil
	raw, err := io.ReadAll(io.LimitReader(c.req.Body, limit+1))
	switch {
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
	c.bodyRead = true
	if bounded {
		// Clear it: the server's background read, which notices a client
		// going away mid-stream, runs on the same connection.
		_ = rc.SetReadDeadline(time.Time{})
	}
	return raw, true
}

// ownBodies are the routes that read their body themselves, under their
// own deadline and the per-client slot (readBody).
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
