package simengine

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// streamOnce runs one streaming completion and returns its token count.
func streamOnce(c *http.Client, url string, maxTokens int) (int, error) {
	body := fmt.Sprintf(`{"model":"sim-model","prompt":"benchmark prompt with a few words","max_tokens":%d,"stream":true}`, maxTokens)
	resp, err := c.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	n, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		switch l := sc.Text(); {
		case l == "data: [DONE]":
			done = true
		case strings.HasPrefix(l, `data: {"error"`):
			return n, fmt.Errorf("error event %s", l)
		case strings.HasPrefix(l, "data: "):
			n++
		}
	}
	if !done {
		return n, fmt.Errorf("stream ended without [DONE] after %d tokens", n)
	}
	return n, sc.Err()
}

func concurrentStreams(tb testing.TB, e *Engine, streams, maxTokens int) {
	tr := &http.Transport{MaxIdleConnsPerHost: streams, MaxConnsPerHost: streams}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := streamOnce(c, e.URL(), maxTokens)
			if err == nil && n != maxTokens {
				err = fmt.Errorf("got %d tokens, want %d", n, maxTokens)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// Test200ConcurrentStreams is the must-hold: 200 simultaneous streams on
// one engine, every one complete and error-free.
func Test200ConcurrentStreams(t *testing.T) {
	e := startEngine(t, nil)
	concurrentStreams(t, e, 200, 8)
	if st := e.State(); st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("engine not idle after the streams: %+v", st)
	}
}

// BenchmarkConcurrentStreams200 reports the engine-side cost of 200
// concurrent 32-token streams per generated token (client included: both
// ends run in this process, so ns/token is an upper bound).
func BenchmarkConcurrentStreams200(b *testing.B) {
	e := startEngine(b, nil)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		concurrentStreams(b, e, 200, 32)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*200*32), "ns/token")
	b.ReportMetric((processCPU()-cpu0)*1e9/float64(b.N*200*32), "cpu-ns/token")
}

// processCPU is the process's user+system CPU seconds. It includes the
// client goroutines of the benchmark: an upper bound for the engine.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkTokenPath measures the CPU per generated token of one stream
// with a zero-time profile, so the figure is the engine's own overhead.
func BenchmarkTokenPath(b *testing.B) {
	e := startEngine(b, func(c *Config) {
		p := fastProfile()
		p.TTFTC, p.TPOTIntercept, p.TPOTSlope = 0, 1e-12, 1e-12
		c.Profile = p
	})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	const tokens = 256
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := streamOnce(c, e.URL(), tokens); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
	b.ReportMetric((processCPU()-cpu0)*1e9/float64(b.N*tokens), "cpu-ns/token")
}

// BenchmarkTimingRealClock compares the real-clock TTFT of one request with
// the profile's prefill_time (ratio 1.0 is exact).
func BenchmarkTimingRealClock(b *testing.B) {
	prof := DefaultProfile("sim-0")
	e := startEngine(b, func(c *Config) { c.Profile = prof })
	prompt := strings.Repeat("word ", 2000)
	want := prof.PrefillTime(CountTokens(prompt))
	var sum float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		resp, err := http.Post(e.URL()+"/v1/completions", "application/json", strings.NewReader(`{"model":"sim-model","prompt":"`+prompt+`","max_tokens":1}`))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sum += time.Since(start).Seconds()
	}
	b.ReportMetric(sum/float64(b.N)/want, "ttft/profile")
}
