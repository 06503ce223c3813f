package vllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// Options configure the HTTP client for one engine.
type Options struct {
	APIKey         string        // sent as Authorization: Bearer; "" sends none
	ConnectTimeout time.Duration // TCP connect deadline
	MaxConns       int           // data connections to this engine
	IdleConns      int           // kept-alive connections
	MaxResponse    int64         // bytes kept of a non-streamed response
	// Transport is TransportH1 (the default, "") or TransportNetHTTP:
	// which HTTP/1.1 client carries the legs (docs/performance.md, "The
	// engine transport").
	Transport string
}

// Engine transports.
const (
	TransportH1      = "h1"
	TransportNetHTTP = "net/http"
)

// CheckTransport refuses a transport name this build does not have.
func CheckTransport(name string) error {
	if name != "" && name != TransportH1 && name != TransportNetHTTP {
		return fmt.Errorf("engine transport %q: want %s or %s", name, TransportH1, TransportNetHTTP)
	}
	return nil
}

// Client talks to one engine.
type Client struct {
	base string
	key  string
	auth string // the Authorization value: "Bearer " and key, or ""
	// rt sends every request itself, not through an http.Client, whose
	// only work here was copying each request's headers for redirects
	// (an engine's answer is never a redirect to follow: a 3xx is an
	// error like any status but 200).
	rt  http.RoundTripper
	max int64
}

// NewClient returns a client for the engine at base (no trailing '/').
func NewClient(base string, o Options) *Client {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.MaxResponse <= 0 {
		o.MaxResponse = 16 << 20
	}
	dial := (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	var tr http.RoundTripper = newH1Transport(dial, o.MaxConns, o.IdleConns)
	if !strings.HasPrefix(base, "http://") || o.Transport == TransportNetHTTP {
		tr = netHTTPTransport(dial, o)
	}
	c := &Client{base: base, key: o.APIKey, rt: tr, max: o.MaxResponse}
	if o.APIKey != "" {
		c.auth = "Bearer " + o.APIKey
	}
	return c
}

// netHTTPTransport is net/http's client transport tuned for engine legs:
// no proxy, no compression (streams must reach the client token by
// token), HTTP/1.1 only, the same connection bounds as h1 and 64 KiB
// buffers (net/http's default is 4 KiB; a stream's frames arrive in
// bursts).
func netHTTPTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error), o Options) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // engines are addressed directly, never through a proxy
		DialContext:         dial,
		MaxConnsPerHost:     o.MaxConns,
		MaxIdleConnsPerHost: max(o.IdleConns, 1),
		MaxIdleConns:        max(o.IdleConns, 1),
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		WriteBufferSize:     64 << 10,
		ReadBufferSize:      64 << 10,
	}
}

// URL is the engine's base URL.
func (c *Client) URL() string { return c.base }

// Close releases idle connections.
func (c *Client) Close() {
	if t, ok := c.rt.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// contentTypeJSON is every body's Content-Type value, shared: a header
// value slice is only read once built (and one of length and capacity 1
// cannot be appended to in place).
var contentTypeJSON = []string{"application/json"}

func (c *Client) newRequest(ctx context.Context, method, path string, body []byte, reqID string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	// The header is built in place with canonical keys: Header.Set
	// canonicalised each key and gave each value a slice of its own.
	vals := make([]string, 0, 3)
	h := make(http.Header, 4)
	if body != nil {
		h["Content-Type"] = contentTypeJSON
	}
	for _, kv := range [...]struct{ k, v string }{{"X-Request-Id", reqID}, {"Traceparent", traceparent(ctx)}, {"Authorization", c.auth}} {
		if kv.v != "" {
			vals = append(vals, kv.v)
			h[kv.k] = vals[len(vals)-1 : len(vals) : len(vals)]
		}
	}
	req.Header = h
	return req, nil
}

// readLimited reads a whole response body, failing past limit.
func readLimited(phase fault.Phase, r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, transportError(phase, err, "read response")
	}
	if int64(len(b)) > limit {
		return nil, &fault.Error{Phase: phase, Reason: fault.ResponseLimit, Class: fault.ClassStream,
			Msg: fmt.Sprintf("response exceeds %d bytes (serving.max_response_bytes)", limit)}
	}
	return b, nil
}

// do sends a request and returns the response with a 200, or a classified
// error with the body's detail.
func (c *Client) do(phase fault.Phase, req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return nil, transportError(phase, err, req.Method+" "+req.URL.Path)
	}
	if resp.StatusCode != http.StatusOK {
		detail, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		e := statusError(phase, resp.StatusCode, string(detail))
		redact(e, c.base, c.key)
		return nil, e
	}
	return resp, nil
}

// send builds and sends one request of phase; a request that cannot be
// built is a connection error of that phase, and a status other than 200
// an error with the engine's detail (do).
func (c *Client) send(ctx context.Context, phase fault.Phase, method, path string, body []byte, reqID string) (*http.Response, error) {
	req, err := c.newRequest(ctx, method, path, body, reqID)
	if err != nil {
		return nil, &fault.Error{Phase: phase, Reason: fault.EngineConnection, Class: fault.ClassConnection, Msg: err.Error()}
	}
	return c.do(phase, req)
}

// call sends one request and reads its whole 200 body, at most limit bytes.
func (c *Client) call(ctx context.Context, phase fault.Phase, method, path string, body []byte, reqID string, limit int64) ([]byte, error) {
	resp, e := c.send(ctx, phase, method, path, body, reqID)
	if e != nil {
		return nil, e
	}
	defer resp.Body.Close()
	return readLimited(phase, resp.Body, limit)
}

// Prefill runs the producer leg at endpoint (/v1/completions or
// /v1/chat/completions) and returns the validated handoff. ctx carries the
// leg's deadline.
func (c *Client) Prefill(ctx context.Context, endpoint string, body []byte, reqID string) (*Handoff, error) {
	b, e := c.call(ctx, fault.Prefill, http.MethodPost, endpoint, body, reqID, c.max)
	if e != nil {
		return nil, e
	}
	return parseHandoff(b)
}

// Stream is an open decode leg.
type Stream struct {
	resp   *http.Response
	lines  lineReader
	cancel context.CancelFunc

	base, key string // to redact from an in-stream error a client may see

	// last is when the latest line arrived (since born). The idle timer
	// re-arms from it when it fires, rather than every line resetting the
	// timer: a store per token instead of a timer-heap update.
	born time.Time
	last atomic.Int64

	mu       sync.Mutex // guards idle, timer, gen and timedOut
	idle     time.Duration
	timer    *time.Timer
	gen      int // which SetIdleTimeout the running timer belongs to
	timedOut bool

	// ended is set once [DONE] was read: Close then reads the rest of
	// the response so the connection can carry the next leg.
	ended bool
	// Status is the engine's HTTP status (200).
	Status int
}

// streamBufSize is a decode stream's read buffer. The transport already
// reads the socket through its own 4 KiB buffer and hands over only the
// chunks that buffer holds, so a larger one here would fill no further
// per read for token-sized events; it only cost memory (16 KiB per stream
// before, 16 MB at 1,000 streams). A longer line is collected by lineReader.
const streamBufSize = 4 << 10

// readerPool recycles decode streams' read buffers: a fresh one per
// stream was the largest allocation of a routed request. Close returns it.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, streamBufSize) }}

// OpenStream sends the decode leg and returns its stream once the engine
// answered 200. Cancel ctx (or Close) to abort the leg: the engine sees
// the connection close and stops generating.
func (c *Client) OpenStream(ctx context.Context, endpoint string, body []byte, reqID string) (*Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, e := c.send(ctx, fault.Decode, http.MethodPost, endpoint, body, reqID)
	if e != nil {
		cancel()
		return nil, e
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	return &Stream{resp: resp, lines: lineReader{r: br}, cancel: cancel, Status: resp.StatusCode,
		base: c.base, key: c.key, born: time.Now()}, nil
}

// SetIdleTimeout bounds the silence between chunks from now on; 0 removes
// the bound. When it fires the leg is aborted and Next reports a timeout.
func (s *Stream) SetIdleTimeout(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle = d
	s.gen++
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if d > 0 {
		s.touch()
		gen := s.gen
		s.timer = time.AfterFunc(d, func() { s.expire(gen) })
	}
}

// expire runs when the idle timer fires: the leg times out if no line came
// for the whole bound, else the timer waits out the rest of it.
func (s *Stream) expire(gen int) {
	s.mu.Lock()
	if gen != s.gen {
		s.mu.Unlock()
		return // replaced or closed meanwhile
	}
	if quiet := time.Duration(s.sinceBorn() - s.last.Load()); quiet < s.idle {
		s.timer.Reset(s.idle - quiet)
		s.mu.Unlock()
		return
	}
	s.timedOut = true
	s.mu.Unlock()
	s.cancel()
}

func (s *Stream) sinceBorn() int64 { return int64(time.Since(s.born)) }

func (s *Stream) touch() { s.last.Store(s.sinceBorn()) }

// Next returns the next data event. Non-data lines (comments, event names)
// are skipped. The stream ending before [DONE] is an error.
func (s *Stream) Next() (Event, error) { return s.next(true) }

// NextBuffered is Next without copying the event: its Data and Usage point
// into the stream's read buffer and hold only until the next call. For a
// caller that copies what it keeps (the router's relay and assembler),
// which saves the one allocation per token.
func (s *Stream) NextBuffered() (Event, error) { return s.next(false) }

func (s *Stream) next(own bool) (Event, error) {
	if s.lines.r == nil {
		return Event{}, invalidStream("read from a closed stream")
	}
	for {
		line, err := s.lines.next()
		if err != nil {
			return Event{}, s.readError(err)
		}
		s.touch()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimPrefix(data, []byte(" "))
		if own {
			data = append([]byte(nil), data...)
		}
		ev, e := parseEvent(data)
		redact(e, s.base, s.key)
		s.ended = ev.Done
		return ev, e
	}
}

// Ready reports that the next event is already buffered, so Next returns
// without waiting on the engine: a relay may hold its flush until then.
func (s *Stream) Ready() bool { return s.lines.r != nil && s.lines.dataBuffered() }

func (s *Stream) readError(err error) error {
	s.mu.Lock()
	timedOut := s.timedOut
	s.mu.Unlock()
	if timedOut {
		return &fault.Error{Phase: fault.Decode, Reason: fault.EngineTimeout, Timeout: true, Class: fault.ClassStream,
			Msg: "engine went silent between tokens"}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return invalidStream("stream ended before the [DONE] terminator")
	}
	return transportError(fault.Decode, err, "read decode stream")
}

func invalidStream(msg string) *fault.Error {
	return &fault.Error{Phase: fault.Decode, Reason: fault.EngineConnection, Class: fault.ClassStream, Msg: msg}
}

// Close aborts the leg if it is still running and releases the connection
// and the read buffer; call it from the goroutine that reads (cancel the
// context to abort from elsewhere). Reading after Close is an error.
func (s *Stream) Close() {
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.gen++
	s.mu.Unlock()
	if s.ended {
		s.drain()
	}
	s.cancel()
	s.resp.Body.Close()
	if br := s.lines.r; br != nil {
		s.lines = lineReader{}
		br.Reset(nil)
		readerPool.Put(br)
	}
}

// drainTimeout and drainLimit bound what Close reads after [DONE]. Engines
// often write the chunked body's terminator apart from the last event (a
// Go server once its handler returns, Starlette's StreamingResponse as a
// final empty message), so it can arrive just after the reader saw [DONE];
// a body closed before its end closes the connection, and every decode
// leg then needed a new one. On loopback or a LAN the terminator is
// microseconds behind; an engine that sends nothing more within the bound,
// or more than the limit, loses the connection as before.
const (
	drainTimeout = 20 * time.Millisecond
	drainLimit   = 4 << 10
)

// drain reads the rest of an ended stream's response, within the bounds.
func (s *Stream) drain() {
	if b, ok := s.resp.Body.(*h1Body); ok && b.done {
		return // the terminator came with the last event
	}
	t := time.AfterFunc(drainTimeout, s.cancel)
	_, _ = io.Copy(io.Discard, io.LimitReader(s.resp.Body, drainLimit))
	t.Stop()
}

// Tokenize counts the prompt of a completions body (prompt) or a chat body
// (messages) on the engine's /tokenize route.
func (c *Client) Tokenize(ctx context.Context, body []byte) (int, error) {
	tc, e := c.tokenize(ctx, fault.Admission, body)
	return tc.Count, e
}

// TokenizeIDs is Tokenize with the prompt's token ids: nil unless the
// answer's tokens are non-negative ints as many as its count (the ids
// prefix hashing needs; runtime reference §1.6).
func (c *Client) TokenizeIDs(ctx context.Context, body []byte) (int, []int, error) {
	tc, e := c.tokenize(ctx, fault.Admission, body)
	return tc.Count, tc.IDs, e
}

// Health probes GET /health: nil when the engine answers 200.
func (c *Client) Health(ctx context.Context) error {
	resp, e := c.send(ctx, fault.Health, http.MethodGet, "/health", nil, "")
	if e != nil {
		return e
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return nil
}

// Version reads GET /version.
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct{ Version string }
	b, e := c.call(ctx, fault.Health, http.MethodGet, "/version", nil, "", 1<<16)
	if e != nil {
		return "", e
	}
	if err := json.Unmarshal(b, &v); err != nil || strings.TrimSpace(v.Version) == "" {
		return "", invalid(fault.Health, fault.ClassInferenceStatus, "/version answered without a version")
	}
	return v.Version, nil
}
