package router

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/testkit"
	"github.com/narwhal-go/narwhal/internal/ui"
)

// serveOwn serves h's router through Serve (its connection bounds and
// ConnContext) on a fresh loopback listener, stopped at cleanup.
func serveOwn(t *testing.T, h *harness) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(sctx, ln, h.router, time.Second) }()
	t.Cleanup(func() { cancel(); <-served })
	return ln.Addr().String()
}

// feedConn is a raw connection asking for the dashboard feed.
type feedConn struct {
	conn net.Conn
	br   *bufio.Reader
}

// openFeed dials addr from the local IP src and asks for the feed; a
// positive rcvbuf shrinks the client's receive buffer before connecting,
// so a client that never reads stalls the server's writes quickly.
func openFeed(t *testing.T, addr, src string, rcvbuf int) *feedConn {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte("GET " + ui.Path + "/feed HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	return &feedConn{conn: conn, br: bufio.NewReader(conn)}
}

// status reads the answer's status line and headers.
func (f *feedConn) status(t *testing.T) (*http.Response, []byte) {
	t.Helper()
	_ = f.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(f.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// The feed admits FeedsPerClient viewers per address and Feeds in all,
// refusing more in OpenAI's error shape (429 per client, 503 in all),
// and gives a slot back when its viewer leaves.
func TestFloodFeedClientCaps(t *testing.T) {
	h := newHarness(t, pd, nil, func(o *Options) { o.HTTP = httpguard.Options{FeedsPerClient: 2, Feeds: 3} })
	addr := serveOwn(t, h)
	var open []*feedConn
	for i, tc := range []struct {
		src    string
		status int
	}{{"127.0.0.1", 200}, {"127.0.0.1", 200}, {"127.0.0.1", 429}, {"127.0.0.2", 200}, {"127.0.0.3", 503}} {
		f := openFeed(t, addr, tc.src, 0)
		resp, b := f.status(t)
		if resp.StatusCode != tc.status {
			t.Fatalf("feed %d from %s: %d %s, want %d", i, tc.src, resp.StatusCode, b, tc.status)
		}
		if tc.status == 200 {
			open = append(open, f)
			continue
		}
		e, ok := openAIError(b)
		if !ok || e.Code == nil || *e.Code != "feed_limit" || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(e.Message, "limit") {
			t.Errorf("feed %d refused with %d %v %s, want OpenAI's shape, code feed_limit and Retry-After", i, resp.StatusCode, resp.Header, b)
		}
	}
	open[2].conn.Close() // 127.0.0.2 leaves: its slot comes back
	eventually(t, "the slot of a viewer that left is given back", func() bool {
		f := openFeed(t, addr, "127.0.0.3", 0)
		defer f.conn.Close()
		resp, _ := f.status(t)
		return resp.StatusCode == 200
	})
}

// A viewer that never reads is dropped once a write has waited
// FeedWriteTimeout, while one that reads keeps its feed.
func TestFloodFeedStalledViewerIsDropped(t *testing.T) {
	const deadline = 500 * time.Millisecond
	h := newHarness(t, pd, nil, func(o *Options) {
		o.HTTP = httpguard.Options{FeedWriteTimeout: deadline, FeedsPerClient: 1}
	})
	addr := serveOwn(t, h)
	// Fifty refused requests fill the view's failure list (journal.RecentLimit),
	// about 15 KiB a view, so a viewer's buffers fill in a few events.
	for i := range journal.RecentLimit {
		if resp, b := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("q", i), "max_tokens": -1}); resp.StatusCode != 400 {
			t.Fatalf("premise: an invalid request is refused 400, got %d %s", resp.StatusCode, b)
		}
	}
	reader := openFeed(t, addr, "127.0.0.6", 0)
	if resp, b := reader.status(t); resp.StatusCode != 200 {
		t.Fatalf("reading viewer: %d %s", resp.StatusCode, b)
	}
	events := make(chan struct{}, 64)
	go func() { // ends when the connection closes at cleanup
		sc := bufio.NewScanner(reader.br)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		_ = reader.conn.SetReadDeadline(time.Time{})
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: view") {
				select {
				case events <- struct{}{}:
				default:
				}
			}
		}
	}()
	start := time.Now()
	stalled := openFeed(t, addr, "127.0.0.5", 4096) // never read past its status
	if resp, b := stalled.status(t); resp.StatusCode != 200 {
		t.Fatalf("stalled viewer: %d %s", resp.StatusCode, b)
	}
	var dropped time.Duration
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the stalled viewer's slot is given back", func() bool {
		probe := openFeed(t, addr, "127.0.0.5", 0) // FeedsPerClient 1: 200 only once the stalled feed ended
		defer probe.conn.Close()
		resp, _ := probe.status(t)
		dropped = time.Since(start)
		return resp.StatusCode == 200
	})
	t.Logf("stalled viewer dropped %v after it connected (write deadline %v)", dropped.Round(time.Millisecond), deadline)
	// Its buffers (about 45 KiB: the 16 KiB socket buffer doubled, the
	// client's 4 KiB, the server's write buffer) hold three views of one
	// a second; the drop comes one deadline after the next write stalls.
	if limit := 4*time.Second + deadline + 2*time.Second; dropped > limit {
		t.Errorf("stalled viewer dropped after %v, want within %v", dropped, limit)
	}
	// Its connection is closed: what it has buffered ends in EOF, not
	// in an endless stream.
	_ = stalled.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.Copy(io.Discard, stalled.conn); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Errorf("stalled viewer's connection not closed: %v", err)
	}
	drain(events)
	select {
	case <-events:
	case <-time.After(5 * time.Second):
		t.Fatal("the reading viewer's feed stopped too")
	}
}

func drain(c chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
