package router

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/journal"
)

// bodyReads counts the completion bodies being read, per remote IP
// address, so one client cannot hold an unbounded number of connections
// mid-body.
type bodyReads struct {
	mu   sync.Mutex     // guards byIP
	byIP map[string]int // remote IP → bodies being read now
}

// take claims one of ip's limit slots; false when all are in use.
func (b *bodyReads) take(ip string, limit int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byIP[ip] >= limit {
		return false
	}
	if b.byIP == nil {
		b.byIP = map[string]int{}
	}
	b.byIP[ip]++
	return true
}

// done gives ip's slot back.
func (b *bodyReads) done(ip string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byIP[ip]--; b.byIP[ip] <= 0 {
		delete(b.byIP, ip)
	}
}

// total is the number of bodies being read now, from every client.
func (b *bodyReads) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, k := range b.byIP {
		n += k
	}
	return n
}

// clientIP is the remote address without its port.
func clientIP(req *http.Request) string {
	if host, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
		return host
	}
	return req.RemoteAddr
}

// readBody reads the request body within the body deadline
// (HTTPOptions.BodyReadTimeout, never past the request's deadline) and
// the serving.max_request_bytes cap, holding one of its address's
// HTTPOptions.BodyReadsPerClient slots meanwhile. On failure it answers
// and settles the call.
func (c *call) readBody() ([]byte, bool) {
	r := c.r
	ip := clientIP(c.req)
	if !r.reads.take(ip, r.httpOpts.BodyReadsPerClient) {
		c.fail(outcome{terminal: journal.TerminalRejected, reason: journal.ReasonInflightLimit,
			detail: fmt.Sprintf("%d request bodies from %s are already being read (per-client limit)", r.httpOpts.BodyReadsPerClient, ip),
			err: overloaded("client_body_limit", "too many requests from this address are still sending their bodies; "+
				"send each body promptly, or use fewer connections at once", 1)})
		return nil, false
	}
	defer r.reads.done(ip)
	limit := int64(r.cfg.Serving.MaxRequestBytes)
	d := min(r.httpOpts.BodyReadTimeout, c.deadline.Sub(r.clock.Now()))
	// The connection's own deadline: a timer could not interrupt a Read
	// blocked on a silent client. Handlers behind a ResponseWriter that
	// cannot set it (a wrapper without Unwrap) read without one.
	rc := http.NewResponseController(c.w)
	bounded := rc.SetReadDeadline(time.Now().Add(d)) == nil
	raw, err := io.ReadAll(io.LimitReader(c.req.Body, limit+1))
	switch {
	case err != nil && isTimeout(err):
		c.fail(outcome{terminal: journal.TerminalInvalid, detail: fmt.Sprintf("request body not received within %v", d),
			err: &apiError{Status: 408, Type: typeInvalid, Code: strp("body_read_timeout"),
				Message: fmt.Sprintf("the request body did not arrive within %v; send it in one go", d.Round(time.Millisecond))}})
		return nil, false
	case err != nil:
		c.fail(outcome{terminal: journal.TerminalCancelled})
		return nil, false
	case int64(len(raw)) > limit:
		c.fail(outcome{terminal: journal.TerminalInvalid,
			err: &apiError{Status: 413, Type: typeInvalid, Code: strp("request_too_large"), Message: "request body exceeds max_request_bytes"}})
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

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
