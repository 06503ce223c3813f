package router

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// usage is what the test process holds: open descriptors, goroutines and
// resident memory.
type usage struct {
	fds, goroutines int
	rssKiB          int
}

func (u usage) String() string {
	return fmt.Sprintf("%d fds, %d goroutines, RSS %.1f MiB", u.fds, u.goroutines, float64(u.rssKiB)/1024)
}

func measure(t *testing.T) usage {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	u := usage{fds: len(fds), goroutines: runtime.NumGoroutine()}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				u.rssKiB, _ = strconv.Atoi(f[1])
			}
		}
	}
	return u
}

// floodConns is the zero-byte flood's size: the 3,000 where the
// descriptor limit allows both ends in one process, fewer under the race
// detector (8,128 goroutines at most); NARWHAL_FLOOD_CONNS overrides.
func floodConns(t *testing.T) int {
	n := 3000
	if floodRace {
		n = 600
	}
	if s := os.Getenv("NARWHAL_FLOOD_CONNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("NARWHAL_FLOOD_CONNS=%q: want a positive count", s)
		}
		n = v
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && int(lim.Cur) < 2*n+200 {
		n = (int(lim.Cur) - 200) / 2
		t.Logf("descriptor limit %d: flood of %d connections", lim.Cur, n)
	}
	return n
}

// zeroByteHeads are requests that declare a body and never send it: on
// routes that read none (a health check, an unknown path, an admin POST)
// and on a completion route, which reads its own under the slow-body slots.
var zeroByteHeads = []string{
	"POST /v1/completions HTTP/1.1\r\nHost: narwhal\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n",
	"GET /health HTTP/1.1\r\nHost: narwhal\r\nContent-Length: 10\r\n\r\n",
	"GET /nowhere HTTP/1.1\r\nHost: narwhal\r\nContent-Length: 10\r\n\r\n",
	"POST /narwhal/lifecycle/drain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n",
}

// A flood of connections each declaring a body it never sends: every one
// is answered and closed within the body read timeout (408; on the
// completion route 429 at the end of the grace once the address's slow
// slots are taken), and the process's descriptors and goroutines come
// back to where they were.
func TestFloodZeroByteBodies(t *testing.T) {
	bodyTimeout, slack := time.Second, 2*time.Second
	if floodRace {
		slack = 5 * time.Second
	}
	h := newHarness(t, pd, nil, func(o *Options) { o.HTTP = httpguard.Options{BodyReadTimeout: bodyTimeout} })
	addr := serveOwn(t, h)
	n := floodConns(t)
	runtime.GC()
	before := measure(t)
	conns := make([]net.Conn, 0, n)
	sent := make([]time.Time, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d of %d: %v", i, n, err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte(zeroByteHeads[i%len(zeroByteHeads)])); err != nil {
			t.Fatalf("conn %d: %v", i, err)
		}
		sent = append(sent, time.Now())
	}
	during := measure(t)
	statuses, completions, slowest := map[int]int{}, map[int]int{}, time.Duration(0)
	for i, c := range conns {
		closed, status, err := answeredAndClosed(c, sent[i].Add(bodyTimeout+slack), func(resp *http.Response) {
			if i%len(zeroByteHeads) == 0 {
				h.noteRID(resp) // a completion's journal row
			}
		})
		if err != nil {
			t.Fatalf("conn %d (%s): %v", i, strings.Fields(zeroByteHeads[i%len(zeroByteHeads)])[1], err)
		}
		statuses[status]++
		if i%len(zeroByteHeads) == 0 {
			completions[status]++
		}
		slowest = max(slowest, closed.Sub(sent[i]))
	}
	for _, c := range conns {
		c.Close()
	}
	nc := (n + len(zeroByteHeads) - 1) / len(zeroByteHeads)
	slots := httpguard.DefaultBodyReadsPerClient
	if statuses[http.StatusRequestTimeout] != n-nc+completions[http.StatusRequestTimeout] ||
		completions[http.StatusRequestTimeout] > slots || completions[http.StatusTooManyRequests] < nc-slots {
		t.Errorf("answers %v, completions %v; want 408 off the completion route, and on it at most %d × 408 (its slots) and the rest 429",
			statuses, completions, slots)
	}
	var after usage
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "descriptors and goroutines back to the baseline", func() bool {
		after = measure(t)
		return after.fds <= before.fds+10 && after.goroutines <= before.goroutines+20
	})
	t.Logf("%d connections: before %v; during %v; after %v; answers %v (completions %v), each connection closed, the last %v after its head (body timeout %v)",
		n, before, during, after, statuses, completions, slowest.Round(time.Millisecond), bodyTimeout)
}

// answeredAndClosed reads one answer from c and then its end, both before
// by; it reports when the end came and the answer's status, and notes
// the answer (a completion's request id, for the journal check).
func answeredAndClosed(c net.Conn, by time.Time, note func(*http.Response)) (time.Time, int, error) {
	_ = c.SetReadDeadline(by)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("no answer in time: %w", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	note(resp)
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
		return time.Time{}, resp.StatusCode, errors.New("answered but still open at the deadline")
	}
	return time.Now(), resp.StatusCode, nil
}

// Slow bodies from 127.0.0.1 while a client on the same address (every
// loopback client is: the NAT case) sends ordinary requests: the slow ones
// are held to the address's slots and refused past them, and the ordinary
// client, whose bodies arrive at once, is never charged for them.
func TestFloodSlowBodiesSpareTheSameAddress(t *testing.T) {
	const perClient, attackers, legit = 4, 16, 40
	h := newHarness(t, pd, nil, func(o *Options) {
		o.HTTP = httpguard.Options{BodyReadTimeout: time.Second, BodyReadsPerClient: perClient}
	})
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n slowCounts
	var maxHeld atomic.Int64
	for range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				slowOnce(h, addr, &n)
			}
		}()
	}
	held := func() int64 { n := int64(h.router.reads.Total()); maxHeld.Store(max(maxHeld.Load(), n)); return n }
	eventually(t, "the attackers hold every slow-body slot of 127.0.0.1", func() bool { return held() == perClient })
	ok := 0
	for i := range legit {
		resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("legit ", i), "max_tokens": 2})
		held()
		if resp.StatusCode == 200 {
			ok++
		} else {
			t.Logf("legit request %d: %d %s", i, resp.StatusCode, out)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("legit client on the attackers' address: %d/%d served; attackers: %d × 429, %d × 408, %d other; at most %d slow bodies held",
		ok, legit, n.refused.Load(), n.timedOut.Load(), n.other.Load(), maxHeld.Load())
	if ok*10 < legit*9 {
		t.Errorf("legit client served %d/%d, want at least 90%%", ok, legit)
	}
	if n.refused.Load() == 0 || maxHeld.Load() > perClient || n.other.Load() != 0 {
		t.Errorf("slow bodies: %d refused, %d other answers, at most %d held; want refusals past the %d slots, never more held",
			n.refused.Load(), n.other.Load(), maxHeld.Load(), perClient)
	}
}

// slowCounts are the attackers' answers.
type slowCounts struct{ refused, timedOut, other atomic.Int64 }

// slowOnce trickles one completion body from 127.0.0.1, a byte every
// 100 ms, and counts its answer (noted, so the harness checks its
// journal row).
func slowOnce(h *harness, addr string, n *slowCounts) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		n.other.Add(1)
		return
	}
	defer conn.Close()
	done := make(chan struct{})
	defer close(done)
	conn.Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: narwhal\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"))
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for range 199 {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		n.other.Add(1)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	h.noteRID(resp)
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		n.refused.Add(1)
	case http.StatusRequestTimeout:
		n.timedOut.Add(1)
	default:
		n.other.Add(1)
	}
}

// Slow bodies from many addresses add up to at most SlowBodies: past it
// a slow body is refused even from an address with slots to spare.
func TestFloodSlowBodiesServerWideCap(t *testing.T) {
	h := newHarness(t, pd, nil, func(o *Options) {
		o.HTTP = httpguard.Options{BodyReadTimeout: 700 * time.Millisecond, BodyReadsPerClient: 4, SlowBodies: 2}
	})
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	var ts []*trickler
	for _, src := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		tr := trickle(t, addr, src, 100*time.Millisecond)
		defer tr.close()
		ts = append(ts, tr)
	}
	statuses := map[int]int{}
	for i, tr := range ts {
		resp, b, err := tr.response(5 * time.Second)
		if err != nil {
			t.Fatalf("slow request %d: no answer: %v", i, err)
		}
		h.noteRID(resp)
		statuses[resp.StatusCode]++
		if e, ok := openAIError(b); resp.StatusCode == 429 && (!ok || e.Code == nil || *e.Code != "client_body_limit" ||
			!strings.Contains(e.Message, "server-wide limit")) {
			t.Errorf("429 %s, want client_body_limit naming the server-wide limit", b)
		}
	}
	if statuses[408] != 2 || statuses[429] != 1 {
		t.Errorf("slow requests from three addresses answered %v, want 2 × 408 and 1 × 429 (server-wide cap of 2)", statuses)
	}
}
