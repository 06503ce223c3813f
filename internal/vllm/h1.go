package vllm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// h1Transport is the round tripper for plain-HTTP engines: HTTP/1.1 on
// kept-alive connections, with the request written and the response read
// on the caller's goroutine.
//
// net/http's Transport gives every connection a read loop and a write
// loop goroutine and hands each request and response between them and
// the caller; behind the router that is two goroutines, two 4 KiB
// buffers and three goroutine switches per leg, for engines that answer
// one request per connection at a time anyway. Here a leg costs none of
// those: the caller writes, reads the head, and reads the body straight
// from the connection's buffer.
//
// What the read loop also did, noticing that the engine closed an idle
// connection, is done at reuse: a connection idle longer than reuseIdle
// is closed instead of reused (uvicorn, vLLM's server, closes idle ones
// after 5 s), one idle longer than peekIdle is peeked for a close first,
// and a request whose reused connection ended before the request was
// fully written is sent once more on a fresh one. A request written whole
// is never resent, as net/http never resends a written POST: the engine
// may have started it (a leg that fails so is re-placed by the router,
// which knows whether that is safe). An engine that answers before the
// body is written (a 413) and closes is read: its status is the answer,
// not the write error.
type h1Transport struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle int
	// slots bounds the requests in flight (one token each; nil: no
	// bound). Unlike MaxConnsPerHost it does not count idle connections:
	// what the bound protects is the engine's concurrency.
	slots chan struct{}
	mu    sync.Mutex // guards idle
	idle  []*h1Conn  // most recently used last
}

// reuseIdle is how long a connection may sit idle and still be reused:
// well inside uvicorn's 5 s keep-alive, so the engine has not closed it.
const reuseIdle = 2 * time.Second

// peekIdle is how long a connection may sit idle and be reused without
// peeking: a close in so short a time is an engine failing, which the
// resend of a reused connection's request covers; under load it saves a
// syscall per leg.
const peekIdle = 100 * time.Millisecond

// aLongTimeAgo is a deadline in the past: it wakes a blocked read or
// write at once.
var aLongTimeAgo = time.Unix(1, 0)

type h1Conn struct {
	c      net.Conn
	br     *bufio.Reader
	usedAt time.Time // when it went idle
	reused bool
}

// writerPool lends the buffer a request head and body are written
// through: a connection needs it only while it sends.
var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}

func newH1Transport(dial func(ctx context.Context, network, addr string) (net.Conn, error), maxConns, maxIdle int) *h1Transport {
	t := &h1Transport{dial: dial, maxIdle: max(maxIdle, 1)}
	if maxConns > 0 {
		t.slots = make(chan struct{}, maxConns)
	}
	return t
}

// RoundTrip sends req and returns its response; the body must be read to
// the end and closed for the connection to be kept.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := t.acquire(ctx); err != nil {
		return nil, err
	}
	resp, err := t.exchange(ctx, req)
	if err != nil {
		t.release()
	}
	return resp, err
}

// exchange tries a kept connection, then, if the engine had closed it
// before answering, a fresh one.
func (t *h1Transport) exchange(ctx context.Context, req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		hc, err := t.conn(ctx, req.URL.Host, attempt > 0)
		if err != nil {
			return nil, err
		}
		resp, written, err := t.send(ctx, hc, req)
		if err == nil {
			return resp, nil
		}
		hc.c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt > 0 || !hc.reused || written || !closedBeforeAnswer(err) || req.GetBody == nil {
			return nil, err
		}
		if req.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
}

// closedBeforeAnswer is the error of a connection the engine closed: an
// end of stream or a reset before any response byte.
func closedBeforeAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// earlyAnswerWait bounds the read of an answer the engine sent before
// the request was written whole.
const earlyAnswerWait = time.Second

// send writes req on hc and reads the response head; written says the
// request went out whole. When the write fails, an answer the engine
// already sent (a 413 before the body) is read and returned instead of
// the write error; the connection is then not kept.
func (t *h1Transport) send(ctx context.Context, hc *h1Conn, req *http.Request) (*http.Response, bool, error) {
	stop := context.AfterFunc(ctx, func() { _ = hc.c.SetDeadline(aLongTimeAgo) })
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(hc.c)
	err := writeRequest(bw, req)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writerPool.Put(bw)
	written := err == nil
	var resp *http.Response
	if written {
		resp, err = readResponse(hc.br, req)
	} else if early := t.earlyAnswer(hc, req); early != nil {
		resp, err = early, nil
	}
	if err != nil {
		stop()
		return nil, written, err
	}
	resp.Body = &h1Body{t: t, hc: hc, ctx: ctx, body: resp.Body, stop: stop, keep: written && !resp.Close}
	return resp, written, nil
}

// earlyAnswer reads a response the engine sent before the request was
// written whole, or nil when there is none within earlyAnswerWait.
func (t *h1Transport) earlyAnswer(hc *h1Conn, req *http.Request) *http.Response {
	_ = hc.c.SetReadDeadline(time.Now().Add(earlyAnswerWait))
	resp, err := readResponse(hc.br, req)
	_ = hc.c.SetReadDeadline(time.Time{})
	if err != nil {
		return nil
	}
	return resp
}

// writeRequest writes req: by hand for the requests Client builds (a
// request line, Host, User-Agent, Content-Length, a few single-valued
// headers in sorted order and a body of known length, as req.Write puts
// them), through req.Write for anything else. req.Write's transfer
// writer and sorted header copy were a dozen allocations per leg.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	var arr [8]string
	keys, ok := plainHead(req, arr[:0])
	if !ok {
		return req.Write(w)
	}
	slices.Sort(keys)
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(req.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(req.URL.Host)
	w.WriteString("\r\nUser-Agent: Go-http-client/1.1\r\n")
	if req.ContentLength > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		var n [20]byte
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(n[:0], req.ContentLength, 10))
		w.WriteString("\r\n")
	}
	for _, k := range keys {
		w.WriteString(k)
		w.WriteString(": ")
		w.WriteString(req.Header[k][0])
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	if req.Body == nil {
		return nil
	}
	n, err := io.Copy(w, req.Body)
	req.Body.Close()
	if err == nil && n != req.ContentLength {
		err = fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n)
	}
	return err
}

// plainHead appends req's header keys to keys when writeRequest can write
// the request itself: no header it writes or that changes the framing,
// one value each with nothing req.Write would clean, a body of known
// length, nothing else set that req.Write would honour.
func plainHead(req *http.Request, keys []string) ([]string, bool) {
	if req.URL.Host == "" || (req.Host != "" && req.Host != req.URL.Host) || req.Close || req.Trailer != nil ||
		len(req.TransferEncoding) > 0 || (req.Body != nil && req.Body != http.NoBody && req.ContentLength <= 0) ||
		!httpguts.ValidHostHeader(req.URL.Host) {
		return nil, false
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			return nil, false
		}
		if len(vs) != 1 || len(keys) == cap(keys) || !httpguts.ValidHeaderFieldName(k) || !cleanValue(vs[0]) {
			return nil, false
		}
		keys = append(keys, k)
	}
	return keys, true
}

// cleanValue reports a header value req.Write would send unchanged: valid,
// without line breaks or surrounding blanks.
func cleanValue(v string) bool {
	return httpguts.ValidHeaderFieldValue(v) && !strings.ContainsAny(v, "\r\n") &&
		strings.TrimSpace(v) == v
}

// conn is a kept connection fit for reuse, or a new one.
func (t *h1Transport) conn(ctx context.Context, addr string, fresh bool) (*h1Conn, error) {
	if !fresh {
		if hc := t.takeIdle(); hc != nil {
			return hc, nil
		}
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "80")
	}
	c, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &h1Conn{c: c, br: bufio.NewReader(c)}, nil
}

// takeIdle pops the most recently used idle connection that is still
// open, closing the stale ones on the way.
func (t *h1Transport) takeIdle() *h1Conn {
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			return nil
		}
		hc := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		idle := time.Since(hc.usedAt)
		if idle < reuseIdle && (idle < peekIdle || stillOpen(hc.c)) {
			hc.reused = true
			return hc
		}
		hc.c.Close()
	}
}

// stillOpen peeks at an idle connection without blocking: an idle HTTP/1.1
// connection has nothing to read, so data, an end of stream or an error
// all mean it cannot carry another request.
func stillOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n < 0 && (rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK)
		return true // never wait for readiness
	})
	return err == nil && open
}

// put keeps a connection whose exchange ended cleanly.
func (t *h1Transport) put(hc *h1Conn) {
	hc.usedAt, hc.reused = time.Now(), false
	t.mu.Lock()
	if len(t.idle) < t.maxIdle {
		t.idle = append(t.idle, hc)
		hc = nil
	}
	t.mu.Unlock()
	if hc != nil {
		hc.c.Close()
	}
}

func (t *h1Transport) acquire(ctx context.Context) error {
	if t.slots == nil {
		return nil
	}
	select {
	case t.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for a free engine connection: %w", ctx.Err())
	}
}

func (t *h1Transport) release() {
	if t.slots != nil {
		<-t.slots
	}
}

// CloseIdleConnections closes the kept connections (http.Client.Close…
// calls it).
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, hc := range idle {
		hc.c.Close()
	}
}

// h1Body is a response body on an h1Transport connection. At its end it
// gives the connection back at once (so cancelling the request's context
// afterwards costs nothing); closed before its end, it closes the
// connection, which is how the engine learns the leg was abandoned.
type h1Body struct {
	t    *h1Transport
	hc   *h1Conn
	ctx  context.Context
	body io.ReadCloser
	stop func() bool // cancels the context's deadline hook
	keep bool        // the response allows another request on the connection
	done bool        // the connection was given back or closed
	eof  bool        // done because the body ended
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		if b.eof {
			return 0, io.EOF
		}
		return 0, errors.New("read on a closed response body")
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
		b.finish(true)
	case err != nil && b.ctx.Err() != nil:
		// The deadline hook woke the read: report why, as net/http does.
		err = b.ctx.Err()
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.finish(false)
	return nil
}

// finish gives the connection back after a whole body the engine did not
// ask to end with, or closes it.
func (b *h1Body) finish(whole bool) {
	if b.done {
		return
	}
	b.done = true
	hooked := b.stop()
	if whole && b.keep && hooked {
		b.t.put(b.hc)
	} else {
		b.hc.c.Close()
	}
	b.t.release()
}
