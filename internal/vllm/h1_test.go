package vllm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// countConns counts the TCP connections a test server accepted.
func countConns(srv *httptest.Server) *atomic.Int32 {
	var n atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	return &n
}

// countedEngine serves h on a test server that counts its accepted
// connections, and returns a client for it; both close at cleanup.
func countedEngine(t *testing.T, h http.Handler) (*Client, *atomic.Int32) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	conns := countConns(srv)
	srv.Start()
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL, Options{})
	t.Cleanup(c.Close)
	return c, conns
}

// callN sends n small requests one after another.
func callN(t *testing.T, c *Client, n int) {
	t.Helper()
	for i := range n {
		if _, e := c.call(context.Background(), "prefill", http.MethodPost, "/x", []byte(`{}`), fmt.Sprint(i), 1<<10); e != nil {
			t.Fatal(e)
		}
	}
}

func okHandler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// Sequential legs share one kept connection; one idle past reuseIdle is
// closed instead of reused.
func TestH1ReusesConnections(t *testing.T) {
	c, conns := countedEngine(t, http.HandlerFunc(okHandler))
	callN(t, c, 10)
	if n := conns.Load(); n != 1 {
		t.Fatalf("10 sequential requests opened %d connections, want 1", n)
	}
	tr := c.rt.(*h1Transport)
	tr.mu.Lock()
	tr.idle[0].usedAt = time.Now().Add(-reuseIdle)
	tr.mu.Unlock()
	if _, e := c.call(context.Background(), "prefill", http.MethodPost, "/x", []byte(`{}`), "stale", 1<<10); e != nil {
		t.Fatal(e)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("after a stale idle connection: %d connections, want a second one", n)
	}
}

// rawEngine answers one request per connection and, on a connection's
// second request, closes it without answering: the race where the engine
// drops a kept connection just as it is reused.
func rawEngine(t *testing.T) (string, *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int32
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil || i == 1 {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					served.Add(1)
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &served
}

// A request written whole is never sent again, even on a reused
// connection the engine closed before answering: the engine may have
// started it (net/http never resends a written POST either). The
// router's re-placement, which knows whether that is safe, handles it.
func TestH1NeverResendsAWrittenRequest(t *testing.T) {
	url, served := rawEngine(t) // answers the first request on each connection, reads the second whole and closes
	c := NewClient(url, Options{})
	defer c.Close()
	if b, e := c.call(context.Background(), "prefill", http.MethodPost, "/x", []byte(`{"n":1}`), "a", 1<<10); e != nil || string(b) != `{"ok":true}` {
		t.Fatalf("first request: %q, %v", b, e)
	}
	_, e := c.call(context.Background(), "prefill", http.MethodPost, "/x", []byte(`{"n":2}`), "b", 1<<10)
	if e == nil || fault.As(e).Reason != fault.EngineConnection {
		t.Fatalf("second request on the reused connection: %v, want a connection error (it was written whole)", e)
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("engine answered %d requests, want 1: the written request must not be sent again", n)
	}
}

// An engine that answers before the request body is written (a 413 for a
// body over its limit) and closes: the client gets that status, not the
// broken pipe of the rest of the write.
func TestH1ReadsAnEarlyAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil { // the head only; the body is never read
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\nContent-Length: 27\r\nConnection: close\r\n\r\n{\"detail\":\"body too large\"}")
	}()
	c := NewClient("http://"+ln.Addr().String(), Options{})
	defer c.Close()
	body := bytes.Repeat([]byte("x"), 32<<20) // far past the socket buffers: the write fails
	_, e := c.call(context.Background(), "prefill", http.MethodPost, "/x", body, "r", 1<<10)
	if fe := fault.As(e); fe == nil || fe.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("error %+v, want the engine's 413", e)
	}
}

// A fresh connection that closes before answering is an error, not a
// retry: the engine may have started the work.
func TestH1DoesNotResendOnAFreshConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_, _ = http.ReadRequest(bufio.NewReader(c))
			c.Close()
		}
	}()
	c := NewClient("http://"+ln.Addr().String(), Options{})
	defer c.Close()
	_, e := c.call(context.Background(), "prefill", http.MethodPost, "/x", []byte(`{}`), "r", 1<<10)
	if e == nil || fault.As(e).Reason != fault.EngineConnection {
		t.Fatalf("error %v, want a connection error", e)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d connections for one request on a fresh connection, want 1 (no resend)", n)
	}
}

// Closing a stream before its end closes the connection, which is how
// the engine learns the leg was abandoned; cancelling its context wakes a
// blocked read with the context's error.
func TestH1AbandonAndCancel(t *testing.T) {
	gone := make(chan struct{}, 2) // one per request the test makes
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"text\":\"a\",\"token_ids\":[1]}]}\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		gone <- struct{}{}
	}))
	defer srv.Close()
	c := NewClient(srv.URL, Options{})
	defer c.Close()
	s, e := c.OpenStream(context.Background(), "/v1/completions", []byte(`{}`), "x")
	if e != nil {
		t.Fatal(e)
	}
	if _, e := s.Next(); e != nil {
		t.Fatal(e)
	}
	s.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("engine did not see the abandoned stream's connection close within 5 s")
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(`{}`))
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err = io.Copy(io.Discard, br)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 3*time.Second {
		t.Fatalf("read after cancel: %v after %v, want context.Canceled at once", err, time.Since(start))
	}
}

// MaxConns bounds the requests in flight: one more waits, and gives up
// with its context.
func TestH1BoundsRequestsInFlight(t *testing.T) {
	release := make(chan struct{})
	var inFlight, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		okHandler(w, r)
	}))
	defer srv.Close()
	defer close(release)
	c := NewClient(srv.URL, Options{MaxConns: 2})
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.call(context.Background(), "prefill", http.MethodPost, "/x", []byte(`{}`), fmt.Sprint(i), 1<<10)
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for inFlight.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, e := c.call(ctx, "prefill", http.MethodPost, "/x", []byte(`{}`), "third", 1<<10)
	if e == nil || !fault.As(e).Timeout || !strings.Contains(fault.As(e).Msg, "free engine connection") {
		t.Errorf("third request with two in flight: %v, want a timeout waiting for a connection", e)
	}
	release <- struct{}{}
	release <- struct{}{}
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Errorf("peak in flight %d, want 2", p)
	}
}

// stillOpen tells an idle connection from one the engine closed or wrote
// to out of turn, without blocking.
func TestH1StillOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		peer func(net.Conn)
		want bool
	}{
		{"idle", func(net.Conn) {}, true},
		{"closed by the engine", func(c net.Conn) { c.Close() }, false},
		{"unread bytes", func(c net.Conn) { _, _ = c.Write([]byte("x")) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			peer, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			tc.peer(peer)
			got := stillOpen(c)
			for i := 0; i < 100 && got != tc.want; i++ { // the FIN or byte may still be in flight
				time.Sleep(10 * time.Millisecond)
				got = stillOpen(c)
			}
			if got != tc.want {
				t.Fatalf("stillOpen = %v, want %v", got, tc.want)
			}
		})
	}
}

// An engine that answers "Connection: close" gets a
// new connection for the next request.
func TestH1HonoursConnectionClose(t *testing.T) {
	c, conns := countedEngine(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		okHandler(w, r)
	}))
	callN(t, c, 3)
	if n := conns.Load(); n != 3 {
		t.Fatalf("3 requests answered with Connection: close used %d connections, want 3", n)
	}
	tr := c.rt.(*h1Transport)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 0 {
		t.Fatalf("%d connections kept after Connection: close, want none", len(tr.idle))
	}
}

// TestWriteRequestIsReqWrite: the hand-written head and body are the
// bytes req.Write sends, for the requests Client builds and for the
// unusual ones it hands back to req.Write.
func TestWriteRequestIsReqWrite(t *testing.T) {
	c := NewClient("http://127.0.0.1:8001", Options{APIKey: "k"})
	ctx := WithTraceparent(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	build := func(method, path string, body []byte, mod func(*http.Request)) *http.Request {
		req, err := c.newRequest(ctx, method, path, body, "rid-1-prefill")
		if err != nil {
			t.Fatal(err)
		}
		if mod != nil {
			mod(req)
		}
		return req
	}
	for _, tc := range []struct {
		name        string
		method      string
		body        []byte
		mod         func(*http.Request)
		handWritten bool
	}{
		{"prefill", http.MethodPost, []byte(`{"prompt":"hi"}`), nil, true},
		{"get", http.MethodGet, nil, nil, true},
		{"empty post", http.MethodPost, nil, nil, true},
		{"line break in a value", http.MethodPost, []byte(`{}`), func(r *http.Request) { r.Header.Set("X-Request-Id", "a\r\nb") }, false},
		{"padded value", http.MethodPost, []byte(`{}`), func(r *http.Request) { r.Header["X-Request-Id"] = []string{" a "} }, false},
		{"two values", http.MethodPost, []byte(`{}`), func(r *http.Request) { r.Header.Add("X-Request-Id", "b") }, false},
		{"own user agent", http.MethodGet, nil, func(r *http.Request) { r.Header.Set("User-Agent", "x") }, false},
		{"close", http.MethodGet, nil, func(r *http.Request) { r.Close = true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got bytes.Buffer
			if err := build(tc.method, "/v1/completions?x=1", tc.body, tc.mod).Write(&want); err != nil {
				t.Fatal(err)
			}
			req := build(tc.method, "/v1/completions?x=1", tc.body, tc.mod)
			if _, ok := plainHead(req, make([]string, 0, 8)); ok != tc.handWritten {
				t.Fatalf("written by hand: %v, want %v", ok, tc.handWritten)
			}
			bw := bufio.NewWriter(&got)
			if err := writeRequest(bw, req); err != nil {
				t.Fatal(err)
			}
			bw.Flush()
			if got.String() != want.String() {
				t.Fatalf("writeRequest wrote\n%q\nreq.Write writes\n%q", got.String(), want.String())
			}
		})
	}
}

// TestStreamKeepsItsConnectionAfterDone: engines often write the chunked
// body's terminator apart from the [DONE] event (a Go server when its
// handler returns, Starlette's StreamingResponse as a last empty message),
// so it may arrive after the reader has seen [DONE]. Closing the stream
// then must wait briefly for it rather than drop the connection: every
// decode leg would otherwise open a new one.
func TestStreamKeepsItsConnectionAfterDone(t *testing.T) {
	c, conns := countedEngine(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"choices\":[{\"text\":\"a\",\"token_ids\":[1]}]}\n\ndata: [DONE]\n\n"))
		w.(http.Flusher).Flush()
		time.Sleep(3 * time.Millisecond) // the terminator follows on its own
	}))
	for i := range 5 {
		s, e := c.OpenStream(context.Background(), "/v1/completions", []byte(`{}`), fmt.Sprint(i))
		if e != nil {
			t.Fatal(e)
		}
		for {
			ev, e := s.Next()
			if e != nil {
				t.Fatal(e)
			}
			if ev.Done {
				break
			}
		}
		s.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 sequential decode legs read to [DONE] opened %d connections, want 1", n)
	}
}
