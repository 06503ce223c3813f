package vllm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// uvicornPython is an interpreter that has uvicorn and httptools (Debian's
// python3-uvicorn and python3-httptools, which make tools installs).
func uvicornPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import uvicorn, httptools").Run() == nil {
			return py
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("uvicorn is not installed on CI: the Makefile's tools step installs Debian's python3-uvicorn and python3-httptools")
	}
	t.Skip("uvicorn is not installed: run `make tools` (Debian packages python3-uvicorn, python3-httptools)")
	return ""
}

// startUvicorn serves testdata/uvicorn_engine.py with uvicorn's HTTP
// implementation impl on a loopback listener handed over as fd 3, and
// returns its base URL once it answers.
func startUvicorn(t *testing.T, impl string, keepAlive int) string {
	t.Helper()
	py := uvicornPython(t)
	// Plain TCP, as vLLM's own socket is: Go listens with MPTCP where the
	// kernel has it, and asyncio sets TCP_NODELAY only on IPPROTO_TCP
	// sockets (with Nagle on, every answer stalls 40 ms on a delayed ACK).
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close() // f holds the listening socket now
	if err != nil {
		t.Fatal(err)
	}
	log := &testkit.SyncBuffer{}
	cmd := exec.Command(py, "uvicorn_engine.py", impl, strconv.Itoa(keepAlive))
	cmd.Dir = "testdata"
	cmd.ExtraFiles, cmd.Stdout, cmd.Stderr = []*os.File{f}, log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	base := "http://" + ln.Addr().String()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/ports"); err == nil {
			resp.Body.Close()
			return base
		}
		select {
		case <-done:
			t.Fatalf("uvicorn exited before serving: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("uvicorn did not serve within 15 s: %s", log.String())
		}
	}
}

// TestH1AgainstUvicorn: narwhal's HTTP/1.1 transport against the server
// vLLM runs, with both of uvicorn's HTTP implementations: both legs parse,
// their heads take the hand-read path, one connection carries every
// sequential leg (the stream's chunked terminator comes 3 ms after
// [DONE], in a write of its own as Starlette's StreamingResponse sends
// it), and a connection uvicorn closed while idle is not used.
func TestH1AgainstUvicorn(t *testing.T) {
	for _, impl := range []string{"h11", "httptools"} {
		t.Run(impl, func(t *testing.T) {
			base := startUvicorn(t, impl, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := NewClient(base, Options{})
			defer c.Close()
			for i := range 10 {
				uvicornLegs(t, ctx, c, i)
			}
			if n := distinctPorts(t, ctx, c); n != 1 {
				t.Fatalf("20 sequential legs used %d connections, want 1", n)
			}
			time.Sleep(1500 * time.Millisecond) // past uvicorn's 1 s keep-alive, inside reuseIdle
			uvicornLegs(t, ctx, c, 10)
			if n := distinctPorts(t, ctx, c); n != 2 {
				t.Fatalf("after uvicorn closed the idle connection: %d connections, want 2", n)
			}
			headsAreHandRead(t, base)
		})
	}
}

// uvicornLegs runs one prefill and one four-token decode leg.
func uvicornLegs(t *testing.T, ctx context.Context, c *Client, i int) {
	t.Helper()
	body, _ := ParseBody([]byte(`{"model":"m","prompt":"the quick brown fox","max_tokens":4}`))
	h, e := c.Prefill(ctx, "/v1/completions", PrefillBody(body, "m"), fmt.Sprintf("r%d-prefill", i))
	if e != nil || h.EngineID != "e1" {
		t.Fatalf("prefill %d: %+v %v", i, h, e)
	}
	s, e := c.OpenStream(ctx, "/v1/completions", DecodeBody(body, "m", h.Params), fmt.Sprintf("r%d-decode", i))
	if e != nil {
		t.Fatalf("decode %d: %v", i, e)
	}
	defer s.Close()
	tokens := 0
	for {
		ev, e := s.Next()
		if e != nil {
			t.Fatalf("decode %d: %v", i, e)
		}
		tokens += ev.Tokens
		if ev.Done {
			break
		}
	}
	if tokens != 4 {
		t.Fatalf("decode %d: %d tokens, want 4", i, tokens)
	}
}

func distinctPorts(t *testing.T, ctx context.Context, c *Client) int {
	t.Helper()
	b, e := c.call(ctx, "test", http.MethodGet, "/ports", nil, "", 1<<20)
	if e != nil {
		t.Fatal(e)
	}
	var ports []int
	if err := json.Unmarshal(b, &ports); err != nil {
		t.Fatalf("/ports: %v: %s", err, b)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		seen[p] = true
	}
	return len(seen)
}

// headsAreHandRead sends both legs on a raw connection and checks that
// readResponse's own parser accepts uvicorn's answer heads.
func headsAreHandRead(t *testing.T, base string) {
	t.Helper()
	conn, err := net.Dial("tcp", base[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for _, body := range []string{`{"model":"m","prompt":"a"}`, `{"model":"m","prompt":"a","stream":true}`} {
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: e\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		head, ok := peekHead(br)
		if !ok {
			t.Fatalf("uvicorn's answer to %s: no plain head", body)
		}
		if _, _, ok := parseHead(head); !ok {
			t.Fatalf("uvicorn's head went to http.ReadResponse: %q", head)
		}
		req, _ := http.NewRequest(http.MethodPost, base, nil)
		resp, err := readResponse(br, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(resp.Body).WriteTo(discard{}); err != nil {
			t.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
