package router

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// trickler is a raw client connection sending a completion request whose
// body arrives one byte every gap, the way a slowloris attacker sends it.
type trickler struct {
	conn net.Conn
	stop chan struct{}
	wg   sync.WaitGroup
}

// trickle dials addr from the local IP src (any 127/8 address reaches a
// loopback listener on Linux) and starts trickling.
func trickle(t *testing.T, addr, src string, gap time.Duration) *trickler {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	tr := &trickler{conn: conn, stop: make(chan struct{})}
	const size = 200
	head := "POST /v1/completions HTTP/1.1\r\nHost: narwhal\r\nContent-Type: application/json\r\n" +
		"Content-Length: 200\r\n\r\n{"
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		for range size - 1 {
			select {
			case <-tr.stop:
				return
			case <-time.After(gap):
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	return tr
}

// response reads the router's answer, waiting at most d.
func (tr *trickler) response(d time.Duration) (*http.Response, []byte, error) {
	_ = tr.conn.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(tr.conn), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b, nil
}

func (tr *trickler) close() {
	close(tr.stop)
	tr.conn.Close()
	tr.wg.Wait()
}

// offered is how many completion requests have reached the router.
func (h *harness) offered() int {
	h.router.mu.Lock()
	defer h.router.mu.Unlock()
	return h.router.stats.Offered
}

// openAIError decodes an OpenAI-shaped error body; ok is false when the
// body is not one (no error object, or not JSON).
func openAIError(b []byte) (e struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    *string `json:"code"`
	Param   *string `json:"param"`
}, ok bool) {
	var env struct {
		Error *json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &env) != nil || env.Error == nil || json.Unmarshal(*env.Error, &e) != nil {
		return e, false
	}
	return e, e.Message != "" && e.Type != ""
}

// Slow bodies must not count against the in-flight ceiling, and each
// ends in a 408 once its read deadline passes.
func TestSlowBodiesDoNotLockOutRealRequests(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) { c.Serving.MaxConnections = 2 }, func(o *Options) {
		o.HTTP = httpguard.Options{BodyReadTimeout: 700 * time.Millisecond, BodyReadsPerClient: 4}
	})
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	const slow = 6 // past the ceiling of 2, and past the per-client cap of 4
	var ts []*trickler
	for range slow {
		tr := trickle(t, addr, "127.0.0.2", 100*time.Millisecond)
		defer tr.close()
		ts = append(ts, tr)
	}
	eventually(t, "every slow request reached the router", func() bool { return h.offered() == slow })

	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "a real request", "max_tokens": 2})
	if resp.StatusCode != 200 {
		t.Fatalf("a real request while %d bodies trickle in: %d %s", slow, resp.StatusCode, out)
	}

	statuses := map[int]int{}
	for i, tr := range ts {
		resp, b, err := tr.response(5 * time.Second)
		if err != nil {
			t.Fatalf("slow request %d: no answer: %v", i, err)
		}
		h.noteRID(resp)
		statuses[resp.StatusCode]++
		e, ok := openAIError(b)
		if !ok || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("slow request %d: %d %q, want an OpenAI JSON error", i, resp.StatusCode, b)
		}
		switch resp.StatusCode {
		case 408:
			if e.Type != "invalid_request_error" || e.Code == nil || *e.Code != "body_read_timeout" {
				t.Errorf("408 body %s", b)
			}
		case 429:
			if resp.Header.Get("Retry-After") == "" || e.Code == nil || *e.Code != "client_body_limit" {
				t.Errorf("429 without Retry-After or with the wrong code: %v %s", resp.Header, b)
			}
		}
	}
	if statuses[408] != 4 || statuses[429] != 2 {
		t.Errorf("slow requests answered %v, want 4 × 408 (read deadline) and 2 × 429 (per-client cap)", statuses)
	}
}

// Idle keep-alive connections, slow headers and bodies declared but never
// sent are closed by the server.
func TestIdleAndSlowHeaderConnectionsAreClosed(t *testing.T) {
	h := newHarness(t, pd, nil, func(o *Options) {
		o.HTTP = httpguard.Options{IdleTimeout: 300 * time.Millisecond, ReadHeaderTimeout: 300 * time.Millisecond,
			BodyReadTimeout: 300 * time.Millisecond}
		o.Hosts = httpguard.HostGuard{Loopback: true}
	})
	addr := serveOwn(t, h)

	closedWithin := func(t *testing.T, conn net.Conn, br *bufio.Reader, d time.Duration) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(d))
		_, err := br.ReadByte()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection still open after %v", d)
		}
	}
	t.Run("idle keep-alive", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		conn.Write([]byte("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close {
			t.Fatal("the server did not keep the connection alive at all")
		}
		closedWithin(t, conn, br, 3*time.Second)
	})
	// A request that declares a body and never sends it, on a route that
	// reads none: answered 408 and closed within the body read timeout.
	for _, head := range []string{
		"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n",
		"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n",
		"POST /narwhal/lifecycle/drain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n",
	} {
		t.Run("zero-byte body "+strings.Fields(head)[1], func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte(head))
			br := bufio.NewReader(conn)
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within 3 s: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("%d, want 408", resp.StatusCode)
			}
			closedWithin(t, conn, br, 3*time.Second)
		})
	}
	// Refused before its body is read (a wrong Host, a non-JSON completion,
	// a CORS preflight): answered, then closed within the body read
	// timeout, not held while net/http waits to discard the body.
	for _, tc := range []struct{ name, head string }{
		{"wrong host", "GET /narwhal/state HTTP/1.1\r\nHost: attacker.example\r\nContent-Length: 10\r\n\r\n"},
		{"non-JSON completion", "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n"},
		{"preflight", "OPTIONS /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://elsewhere.example\r\n" +
			"Access-Control-Request-Method: POST\r\nContent-Length: 10\r\n\r\n"},
	} {
		t.Run("refused before the body: "+tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte(tc.head))
			br := bufio.NewReader(conn)
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within 3 s: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.Header.Get("X-Narwhal-Request-Id") != "" {
				h.noteRID(resp) // the refused completion has its journal row
			}
			if resp.StatusCode < 400 && resp.StatusCode != http.StatusNoContent {
				t.Errorf("%d, want a refusal", resp.StatusCode)
			}
			closedWithin(t, conn, br, 3*time.Second)
		})
	}
	t.Run("slow headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write([]byte("GET /health HTTP/1.1\r\nHost: 127.0"))
		closedWithin(t, conn, bufio.NewReader(conn), 3*time.Second)
	})
}

// A body that never finishes inside the request deadline is cut at the
// deadline even when the body timeout is longer.
func TestBodyReadBoundedByTheRequestTimeout(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) {
		c.Serving.RequestTimeoutS, c.Serving.PrefillTimeoutS, c.Engine.FirstTokenTimeoutS = 0.5, 0.5, 0.5
	}, func(o *Options) { o.HTTP.BodyReadTimeout = time.Minute })
	tr := trickle(t, strings.TrimPrefix(h.srv.URL, "http://"), "127.0.0.1", 100*time.Millisecond)
	defer tr.close()
	resp, b, err := tr.response(5 * time.Second)
	if err != nil {
		t.Fatalf("no answer within 5 s: %v", err)
	}
	h.noteRID(resp)
	if resp.StatusCode != 408 {
		t.Errorf("%d %s, want 408", resp.StatusCode, b)
	}
	row := h.row(resp.Header.Get("X-Narwhal-Request-Id"))
	if row.Terminal != journal.TerminalInvalid || row.Status == nil || *row.Status != 408 {
		t.Errorf("journal %s status %v", row.Terminal, row.Status)
	}
}
