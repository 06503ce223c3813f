// Command router-overhead measures what the router adds: time to the first
// streamed token (p50, p99), sustained requests per second and CPU per
// request, at several concurrency levels, against baselines measured in the
// same run on the same simulated engines:
//
//   - "two-leg": the client itself runs the prefill leg on one engine and
//     the decode leg on the other, exactly the engine work the router
//     orders. router − two-leg is the router's own cost.
//   - "direct": one aggregated request to the decode engine, for context:
//     router − direct also contains the price of disaggregation itself
//     (a second HTTP call, the KV pull, the decode engine's first step).
//
// Engines use a short fixed profile (1 ms prefill, 2 ms per decode step) so
// the numbers are about serving, not GPU time.
//
//	go run ./bench/router-overhead [-levels 1,50,200] [-duration 5s] [-tokens 16] [-engines 2]
//
// -engines N runs the router over N engines (half prefill, half decode);
// the baselines still use one prefill and one decode engine, so the
// difference is the router's cost at that fleet size (docs/scale.md).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/router"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

func main() {
	levels := flag.String("levels", "1,50,200", "concurrent streams, comma-separated")
	duration := flag.Duration("duration", 5*time.Second, "measurement time per level and path")
	tokens := flag.Int("tokens", 16, "output tokens per request")
	runs := flag.Int("runs", 3, "repetitions per level; the report shows medians")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	engines := flag.Int("engines", 2, "engines in the routed fleet (at least 2; half prefill)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file")
	flag.Parse()
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10
		defer writeHeapProfile(*memProfile)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	if err := run(*levels, *duration, *tokens, *runs, *jsonOut, max(2, *engines)); err != nil {
		fmt.Fprintln(os.Stderr, "router-overhead:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// writeHeapProfile saves the allocations since the start (see
// go tool pprof -sample_index=alloc_space).
func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "router-overhead:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "router-overhead:", err)
	}
}

// benchProfile is a short fixed profile: 1 ms prefill, 2 ms per decode
// step, so a 16-token request takes about 35 ms on an idle engine.
func benchProfile(iid string) profile.Row {
	one, maxReq, minKV, maxKV := 1, 1024, 1, 1<<22
	fit, cv := 0.01, 0.01
	return profile.Row{IID: iid, TTFTC: 0.001, TPOTIntercept: 0.002, DecodeMinRequests: &one, DecodeMaxRequests: &maxReq,
		DecodeMinKVTokens: &minKV, DecodeMaxKVTokens: &maxKV, DecodeFitMAPE: &fit, DecodeCVMAPE: &cv}
}

type result struct {
	Level    int     `json:"concurrency"`
	Path     string  `json:"path"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	P50, P99 float64 `json:"-"`
	P50ms    float64 `json:"ttfb_ms_p50"`
	P99ms    float64 `json:"ttfb_ms_p99"`
	RPS      float64 `json:"requests_per_s"`
	CPUus    float64 `json:"cpu_us_per_request"`
}

func run(levelList string, d time.Duration, tokens, runs int, jsonOut string, engines int) error {
	fl, err := simengine.StartFleet(engines, simengine.Config{Model: "bench", Profile: benchProfile("x"), MaxNumSeqs: 1024,
		KVCapacityTokens: 1 << 22, MaxModelLen: 8192}, nil)
	if err != nil {
		return err
	}
	defer fl.Close()
	base, stop, err := startRouter(fl.URLs())
	if err != nil {
		return err
	}
	defer stop()
	var all []result
	fmt.Printf("%-6s %-8s %9s %9s %9s %8s %12s\n", "conc", "path", "ttfb p50", "ttfb p99", "req/s", "errors", "cpu µs/req")
	for _, f := range strings.Split(levelList, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return fmt.Errorf("bad level %q", f)
		}
		urls := fl.URLs()
		var ds, ts, rs []result
		for range max(1, runs) {
			dec := urls[len(urls)/2]
			ds = append(ds, measure("direct", c, d, func(hc *http.Client) (float64, error) { return stream(hc, dec, body(tokens, nil)) }))
			ts = append(ts, measure("two-leg", c, d, func(hc *http.Client) (float64, error) { return twoLegs(hc, urls[0], dec, tokens) }))
			rs = append(rs, measure("router", c, d, func(hc *http.Client) (float64, error) { return stream(hc, base, body(tokens, nil)) }))
		}
		direct, twoLeg, routed := median(ds), median(ts), median(rs)
		for _, r := range []result{direct, twoLeg, routed} {
			fmt.Printf("%-6d %-8s %7.2fms %7.2fms %9.1f %8d %12.0f\n", r.Level, r.Path, r.P50*1e3, r.P99*1e3, r.RPS, r.Errors, r.CPUus)
		}
		fmt.Printf("%-6d %-8s %+7.2fms %+7.2fms %8.2fx %8s %+11.0f   (router vs two-leg)\n\n", c, "added", (routed.P50-twoLeg.P50)*1e3,
			(routed.P99-twoLeg.P99)*1e3, routed.RPS/twoLeg.RPS, "", routed.CPUus-twoLeg.CPUus)
		all = append(all, direct, twoLeg, routed)
	}
	if jsonOut != "" {
		b, _ := json.MarshalIndent(all, "", "  ")
		return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

func startRouter(urls []string) (string, func(), error) {
	cfg := fleet.Defaults()
	cfg.Model = "bench"
	cfg.SLO = fleet.SLO{TTFT: 5, TPOT: 1}
	cfg.Serving.MaxConnections = 2048
	cfg.Engine.Tokenize = false // sizing by estimate: the bench measures the serving path
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	for i, u := range urls {
		iid, role := fmt.Sprintf("p%d", i), fleet.Prefill
		if i >= len(urls)/2 {
			iid, role = fmt.Sprintf("d%d", i-len(urls)/2), fleet.Decode
		}
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: u, Role: role})
		store.Profiles = append(store.Profiles, benchProfile(iid))
	}
	if err := cfg.Validate("bench"); err != nil {
		return "", nil, err
	}
	r, err := router.New(&cfg, store, router.Options{})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { router.Serve(ctx, ln, r, time.Second); close(done) }()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }, nil
}

// measure runs c closed-loop clients of one for d and reports time to
// first token and throughput. CPU is the whole process's (clients, router
// and engines), per completed request.
func measure(path string, c int, d time.Duration, one func(*http.Client) (float64, error)) result {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2*c + 8}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var ttfbs []float64
	errs := 0
	cpu0 := cpuSeconds()
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				t, err := one(client)
				mu.Lock()
				if err != nil {
					errs++
				} else {
					ttfbs = append(ttfbs, t)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0
	sort.Float64s(ttfbs)
	r := result{Level: c, Path: path, Requests: len(ttfbs), Errors: errs, RPS: float64(len(ttfbs)) / elapsed}
	if n := len(ttfbs); n > 0 {
		r.P50, r.P99 = ttfbs[n/2], ttfbs[min(n-1, n*99/100)]
		r.P50ms, r.P99ms = r.P50*1e3, r.P99*1e3
		r.CPUus = cpu / float64(n) * 1e6
	}
	return r
}

// median takes each metric's median over repeated runs.
func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	m := rs[0]
	m.P50 = pick(func(r result) float64 { return r.P50 })
	m.P99 = pick(func(r result) float64 { return r.P99 })
	m.RPS = pick(func(r result) float64 { return r.RPS })
	m.CPUus = pick(func(r result) float64 { return r.CPUus })
	m.P50ms, m.P99ms = m.P50*1e3, m.P99*1e3
	m.Requests, m.Errors = 0, 0
	for _, r := range rs {
		m.Requests += r.Requests
		m.Errors += r.Errors
	}
	return m
}

func body(tokens int, kv json.RawMessage) []byte {
	m := map[string]any{"model": "bench", "prompt": "measure the router overhead please", "max_tokens": tokens, "stream": true}
	if kv != nil {
		m["kv_transfer_params"] = kv
	}
	b, _ := json.Marshal(m)
	return b
}

// twoLegs is the router's engine work done by the client: a one-token
// prefill that keeps its KV, then a streamed decode that pulls it.
func twoLegs(hc *http.Client, prefill, decode string, tokens int) (float64, error) {
	t0 := time.Now()
	pb, _ := json.Marshal(map[string]any{"model": "bench", "prompt": "measure the router overhead please", "max_tokens": 1,
		"stream": false, "kv_transfer_params": map[string]bool{"do_remote_decode": true}})
	resp, err := hc.Post(prefill+"/v1/completions", "application/json", bytes.NewReader(pb))
	if err != nil {
		return 0, err
	}
	var out struct {
		KV json.RawMessage `json:"kv_transfer_params"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		return 0, fmt.Errorf("prefill: status %d %v", resp.StatusCode, err)
	}
	return streamFrom(t0, hc, decode, body(tokens, out.KV))
}

// stream sends a streamed completion and returns the time from now to the
// first token event.
func stream(hc *http.Client, base string, b []byte) (float64, error) {
	return streamFrom(time.Now(), hc, base, b)
}

func streamFrom(t0 time.Time, client *http.Client, base string, body []byte) (float64, error) {
	resp, err := client.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		io.Copy(io.Discard, resp.Body)
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	var ttfb float64
	done := false
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "data: ") {
			if ttfb == 0 && strings.Contains(line, `"text"`) {
				ttfb = time.Since(t0).Seconds()
			}
			if strings.HasPrefix(line, "data: [DONE]") {
				done = true
			}
		}
		if err != nil {
			break
		}
	}
	if !done || ttfb == 0 {
		return 0, fmt.Errorf("stream ended early")
	}
	return ttfb, nil
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
