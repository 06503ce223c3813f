package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// floodResult is what the flood's connections were answered, and what
// the legitimate client got meanwhile.
type floodResult struct {
	// Answers counts the flood's answers, answered and closed, by status;
	// 0 is no answer before the deadline. LeftOpen counts the answers
	// after which the connection was still open at the deadline.
	Answers  map[int]int `json:"answers"`
	LeftOpen map[int]int `json:"left_open,omitempty"`
	// Slowest is the longest from a connection's head to its close.
	SlowestS float64 `json:"slowest_close_s"`
	Legit    int     `json:"legit_requests,omitempty"`
	LegitOK  int     `json:"legit_served,omitempty"`
}

// zeroByteHeads declare a body and never send it: on routes that read
// none (a health check, an unknown path, an admin POST) and on a
// completion route, which reads its own under the slow-body slots.
var zeroByteHeads = []string{
	"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n",
	"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n",
	"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n",
	"POST /narwhal/lifecycle/drain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n",
}

// refusedHeads also declare a body and never send it, on requests the
// router refuses before any body is read: a Host the DNS-rebinding guard
// does not answer (421), a completion not declared JSON (415), a CORS
// preflight. Each must still be answered and closed within the body
// read timeout.
var refusedHeads = []string{
	"GET /health HTTP/1.1\r\nHost: narwhal.invalid\r\nContent-Length: 10\r\n\r\n",
	"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n",
	"OPTIONS /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1:1\r\nAccess-Control-Request-Method: POST\r\nContent-Length: 10\r\n\r\n",
}

// completion is an ordinary request's body.
const completion = `{"model":"flood","prompt":"an ordinary request","max_tokens":4}`

// warmUp sends a few ordinary completions so the baseline already holds
// what the first requests set up once (engine connections, pools).
func warmUp(base string) error {
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	for i := range 20 {
		if ok, err := post(hc, base); !ok {
			return fmt.Errorf("warm-up completion %d not served: %v", i, err)
		}
	}
	return nil
}

// post sends one ordinary completion and says whether it was served.
func post(hc *http.Client, base string) (bool, error) {
	resp, err := hc.Post(base+"/v1/completions", "application/json", strings.NewReader(completion))
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	return true, nil
}

// zeroByteFlood opens n connections, each sending one of heads in turn,
// and waits for every one to be answered and closed.
func zeroByteFlood(base string, o options, n int, heads []string) floodResult {
	addr := strings.TrimPrefix(base, "http://")
	res := floodResult{Answers: map[int]int{}}
	conns := make([]net.Conn, 0, n)
	sent := make([]time.Time, 0, n)
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Fprintf(os.Stderr, "flood: dial %d of %d: %v\n", i, n, err)
			res.Answers[0]++
			continue
		}
		conns = append(conns, c)
		_, _ = c.Write([]byte(heads[i%len(heads)]))
		sent = append(sent, time.Now())
	}
	// Every connection is read at once: read one after another, a
	// connection never answered would use up the deadlines of the ones
	// behind it, and their answers would be counted as missing.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, closed := answeredAndClosed(c, sent[i].Add(o.bodyTimeout+3*time.Second))
			c.Close()
			mu.Lock()
			defer mu.Unlock()
			res.count(status, closed, sent[i])
		}()
	}
	wg.Wait()
	return res
}

// answeredAndClosed reads one answer from c and then its end, both
// before by; status 0 is no answer, a zero time a connection still open
// after its answer.
func answeredAndClosed(c net.Conn, by time.Time) (int, time.Time) {
	_ = c.SetReadDeadline(by)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, time.Time{}
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
		return resp.StatusCode, time.Time{}
	}
	return resp.StatusCode, time.Now()
}

// count adds one connection's end to res.
func (res *floodResult) count(status int, closed, sent time.Time) {
	if closed.IsZero() && status != 0 {
		if res.LeftOpen == nil {
			res.LeftOpen = map[int]int{}
		}
		res.LeftOpen[status]++
		return
	}
	res.Answers[status]++
	if !closed.IsZero() {
		res.SlowestS = max(res.SlowestS, closed.Sub(sent).Seconds())
	}
}

// slowFlood runs o.slow attackers trickling completion bodies and one
// legitimate client on the same address for o.slowFor, then waits for
// every attacker's last connection to end.
func slowFlood(base string, o options) floodResult {
	addr := strings.TrimPrefix(base, "http://")
	var mu sync.Mutex
	res := floodResult{Answers: map[int]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range o.slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, t0, closed := slowOnce(addr, o.bodyTimeout)
				mu.Lock()
				res.count(status, closed, t0)
				mu.Unlock()
				// A pause before reconnecting keeps the loopback's
				// TIME_WAIT ports from running out over a long flood.
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	res.Legit, res.LegitOK = legitClient(base, o.slowFor)
	close(stop)
	wg.Wait()
	return res
}

// legitClient sends ordinary completions one after another for d and
// returns how many it sent and how many were served.
func legitClient(base string, d time.Duration) (int, int) {
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	n, ok := 0, 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		if served, err := post(hc, base); served {
			ok++
		} else if n-ok <= 5 {
			fmt.Fprintf(os.Stderr, "flood: legitimate request %d: %v\n", n, err)
		}
	}
	return n, ok
}

// slowOnce trickles one completion body, a byte every 100 ms, and returns
// its answer's status, when it started and when the connection ended
// (zero: not in time).
func slowOnce(addr string, bodyTimeout time.Duration) (int, time.Time, time.Time) {
	t0 := time.Now()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, t0, time.Time{}
	}
	defer conn.Close()
	done := make(chan struct{})
	defer close(done)
	const size = 200
	if _, err := fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", size); err != nil {
		return 0, t0, time.Time{}
	}
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for range size - 1 {
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
	status, closed := answeredAndClosed(conn, t0.Add(bodyTimeout+3*time.Second))
	return status, t0, closed
}
