// Command router-overhead measures what the router adds: time to the first
// streamed token (p50, p99), sustained requests per second, the router's
// CPU per request and its peak RSS, at several concurrency levels, against
// baselines measured in the same round on the same simulated engines:
//
//   - "two-leg": the client itself runs the prefill leg on one engine and
//     the decode leg on the other, exactly the engine work the router
//     orders. router − two-leg is the router's own cost.
//   - "direct": one aggregated request to the decode engine, for context:
//     router − direct also contains the price of disaggregation itself
//     (a second HTTP call, the KV pull, the decode engine's first step).
//   - "router": narwhal-serve (-router-bin, default: built from this tree)
//     as its own process, so its CPU (utime + stime from /proc/PID/stat)
//     and peak RSS (VmHWM, reset each round through clear_refs) are its
//     own, not the engines' or the clients'.
//   - "baseline": a second narwhal-serve binary (-baseline-bin, e.g. the
//     previous build), so a change is measured against its predecessor
//     in the same run.
//   - "relay": a minimal two-leg proxy in its own process (relay.go): the
//     prefill leg, the KV parameters handed on, the decode bytes copied
//     through. It is the floor any router could reach; router ÷ relay is
//     what narwhal's own work costs over it, CPU and RSS included.
//
// The engines run as narwhal-engine sim processes of their own, as
// operators run them, so neither the router's nor this process's CPU
// holds theirs (-engines-inprocess serves them in this process instead).
//
// Each round runs every path once at one level, in an order that rotates
// from round to round; ratios are taken inside a round (router ÷ two-leg,
// router ÷ baseline) and the report gives their median and range.
//
//	go run ./bench/router-overhead [-levels 1,50,200,1000] [-duration 5s] [-runs 3]
//	    [-router-bin PATH] [-baseline-bin PATH] [-prefill-ms 0.1] [-decode-ms 1]
//	    [-tokens 16] [-engines 2] [-engines-inprocess] [-format text|json]
//
// -engines N runs the router over N engines (half prefill, half decode);
// the baselines still use one prefill and one decode engine, so the
// difference is the router's cost at that fleet size (docs/scale.md).
// -inprocess serves the router inside this process instead (CPU is then
// the whole process's), which is what -cpuprofile and -memprofile need to
// see the router's own code.
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
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/router"
)

// options are the command line.
type options struct {
	levels              []int
	duration            time.Duration
	tokens, runs, nEng  int
	routerBin, baseline string
	inProcess           bool
	engInProcess        bool
	routersOnly         bool
	prefill, decode     float64 // seconds
	format, jsonOut     string
}

func main() {
	var o options
	levels := flag.String("levels", "1,50,200,1000", "concurrent streams, comma-separated")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measurement time per level, path and round")
	flag.IntVar(&o.tokens, "tokens", 16, "output tokens per request")
	flag.IntVar(&o.runs, "runs", 3, "rounds per level; the report shows medians and ranges")
	flag.StringVar(&o.jsonOut, "json", "", "also write the results as JSON to this file")
	flag.StringVar(&o.format, "format", "text", "report on stdout: text or json")
	flag.IntVar(&o.nEng, "engines", 2, "engines in the routed fleet (at least 2; half prefill)")
	flag.StringVar(&o.routerBin, "router-bin", "", "narwhal-serve binary to measure (default: go build ./cmd/narwhal-serve into a temporary directory)")
	flag.StringVar(&o.baseline, "baseline-bin", "", "a second narwhal-serve binary measured in the same rounds, e.g. the previous build")
	flag.BoolVar(&o.inProcess, "inprocess", false, "serve the router inside this process (for -cpuprofile/-memprofile; CPU is then the whole process's)")
	flag.BoolVar(&o.routersOnly, "routers-only", false, "measure only router and baseline (an A/B of two builds in less time)")
	flag.BoolVar(&o.engInProcess, "engines-inprocess", false, "serve the simulated engines inside this process instead of as narwhal-engine sim processes")
	relayPrefill := flag.String("relay-prefill", "", "internal: serve as the relay over this prefill engine (with -relay-decode)")
	relayDecode := flag.String("relay-decode", "", "internal: the relay's decode engine")
	prefillMS := flag.Float64("prefill-ms", 0.1, "simulated prefill time per request, ms")
	decodeMS := flag.Float64("decode-ms", 1, "simulated decode step, ms")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile of this process to this file")
	flag.StringVar(&midHeapProfile, "heapprofile", "", "with -inprocess: write the live heap halfway through each router round to this file (the last round's is kept)")
	flag.Parse()
	if *relayPrefill != "" || *relayDecode != "" {
		if err := serveRelay(*relayPrefill, *relayDecode); err != nil {
			fmt.Fprintln(os.Stderr, "router-overhead relay:", err)
			os.Exit(1)
		}
		return
	}
	var err error
	if o.levels, err = parseLevels(*levels); err != nil || (o.format != "text" && o.format != "json") {
		fmt.Fprintf(os.Stderr, "router-overhead: bad -levels %q or -format %q (text or json)\n", *levels, o.format)
		os.Exit(2)
	}
	o.prefill, o.decode, o.nEng = *prefillMS/1e3, *decodeMS/1e3, max(2, o.nEng)
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
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "router-overhead:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func parseLevels(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return nil, fmt.Errorf("bad level %q", f)
		}
		out = append(out, c)
	}
	return out, nil
}

// midHeapProfile is -heapprofile's file: what is live while a round's
// streams are all open, which an end-of-run profile cannot show.
var midHeapProfile string

// writeHeapProfile saves the allocations since the start (see
// go tool pprof -sample_index=alloc_space).
func writeHeapProfile(path string) { writeProfile(path, "allocs") }

// writeProfile saves one of runtime/pprof's named profiles.
func writeProfile(path, name string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "router-overhead:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "router-overhead:", err)
	}
}

// benchProfile is a short fixed profile: prefill seconds per request and
// decode seconds per step.
func benchProfile(iid string, prefill, decode float64) profile.Row {
	one, maxReq, minKV, maxKV := 1, 4096, 1, 1<<22
	fit, cv := 0.01, 0.01
	return profile.Row{IID: iid, TTFTC: prefill, TPOTIntercept: decode, DecodeMinRequests: &one, DecodeMaxRequests: &maxReq,
		DecodeMinKVTokens: &minKV, DecodeMaxKVTokens: &maxKV, DecodeFitMAPE: &fit, DecodeCVMAPE: &cv}
}

// result is one path measured in one round (or, after median, over all).
type result struct {
	Level    int     `json:"concurrency"`
	Path     string  `json:"path"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	P50ms    float64 `json:"ttfb_ms_p50"`
	P99ms    float64 `json:"ttfb_ms_p99"`
	RPS      float64 `json:"requests_per_s"`
	// CPUus is the router process's CPU per request for router paths and
	// this whole process's (clients and engines) for the others.
	CPUus float64 `json:"cpu_us_per_request"`
	RSSMB float64 `json:"peak_rss_mb,omitempty"`
	// Goroutines, HeapMB and StackMB are the router's go_goroutines,
	// go_memstats_heap_inuse_bytes and go_memstats_stack_inuse_bytes
	// halfway through the round, from its /metrics.
	Goroutines float64 `json:"goroutines,omitempty"`
	HeapMB     float64 `json:"heap_inuse_mb,omitempty"`
	StackMB    float64 `json:"stack_inuse_mb,omitempty"`
	// Allocs is the router's heap allocations per request over the round
	// (go_memstats_mallocs_total before and after; the scrapes' own are in
	// it, a few hundred per round).
	Allocs float64 `json:"allocs_per_request,omitempty"`
}

// path is one way of serving a request.
type path struct {
	name string
	one  func(*http.Client) (float64, error)
	proc *routerProc // nil: no router process to account
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "router-overhead-engines-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	urls, stopEngines, err := startEngines(o, dir)
	if err != nil {
		return err
	}
	defer stopEngines()
	paths, stop, err := startPaths(o, urls)
	if err != nil {
		return err
	}
	defer stop()
	rep := report{Setup: setup{PrefillMS: o.prefill * 1e3, DecodeMS: o.decode * 1e3, Tokens: o.tokens, Engines: o.nEng,
		DurationS: o.duration.Seconds(), Rounds: max(1, o.runs), RouterBin: o.routerBin, BaselineBin: o.baseline}}
	rep.Idle = idleCPU(paths, o.duration)
	for _, c := range o.levels {
		rounds := make([][]result, max(1, o.runs))
		for i := range rounds {
			rounds[i] = measureRound(paths, c, o.duration, i)
			fmt.Fprintf(os.Stderr, "router-overhead: %d streams, round %d/%d done\n", c, i+1, len(rounds))
		}
		rep.Levels = append(rep.Levels, summarize(c, rounds))
	}
	return rep.write(o)
}

// startPaths starts the router (and the baseline router) over urls and
// returns every path to measure with a function that stops them.
func startPaths(o options, urls []string) ([]path, func(), error) {
	dec := urls[len(urls)/2]
	paths := []path{
		{name: "direct", one: func(hc *http.Client) (float64, error) { return stream(hc, dec, body(o.tokens, nil)) }},
		{name: "two-leg", one: func(hc *http.Client) (float64, error) { return twoLegs(hc, urls[0], dec, o.tokens) }},
	}
	if o.routersOnly {
		paths = nil
	}
	if o.inProcess {
		base, stop, err := startInProcess(urls, o.prefill, o.decode)
		if err != nil {
			return nil, nil, err
		}
		return append(paths, path{name: "router", one: streamTo(base, o.tokens)}), stop, nil
	}
	dir, err := os.MkdirTemp("", "router-overhead-")
	if err != nil {
		return nil, nil, err
	}
	var procs []*routerProc
	stop := func() {
		for _, p := range procs {
			p.stop()
		}
		os.RemoveAll(dir)
	}
	if !o.routersOnly {
		p, err := startRelay(urls[0], dec)
		if err != nil {
			stop()
			return nil, nil, err
		}
		procs = append(procs, p)
		paths = append(paths, path{name: "relay", one: streamTo(p.base, o.tokens), proc: p})
	}
	bins := []struct{ name, bin string }{{"router", o.routerBin}, {"baseline", o.baseline}}
	if bins[0].bin == "" {
		if bins[0].bin, err = buildServe(dir); err != nil {
			stop()
			return nil, nil, err
		}
	}
	for _, b := range bins {
		if b.bin == "" {
			continue
		}
		p, err := startServe(b.name, b.bin, dir, urls, o.prefill, o.decode)
		if err != nil {
			stop()
			return nil, nil, err
		}
		procs = append(procs, p)
		paths = append(paths, path{name: b.name, one: streamTo(p.base, o.tokens), proc: p})
	}
	return paths, stop, nil
}

// buildServe builds narwhal-serve from this tree.
func buildServe(dir string) (string, error) {
	bin := filepath.Join(dir, "narwhal-serve")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/narwhal-serve").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/narwhal-serve (run from the repository root, or pass -router-bin): %v\n%s", err, out)
	}
	return bin, nil
}

func streamTo(base string, tokens int) func(*http.Client) (float64, error) {
	b := body(tokens, nil)
	return func(hc *http.Client) (float64, error) { return stream(hc, base, b) }
}

func startInProcess(urls []string, prefill, decode float64) (string, func(), error) {
	cfg, store, err := benchFleet(urls, prefill, decode)
	if err != nil {
		return "", nil, err
	}
	r, err := router.New(cfg, store, router.Options{})
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

// measureRound measures every path once at c streams, starting at a
// different path each round so no path always runs first or last.
func measureRound(paths []path, c int, d time.Duration, round int) []result {
	out := make([]result, len(paths))
	for k := range paths {
		i := (k + round) % len(paths)
		p := paths[i]
		if p.proc != nil {
			p.proc.resetPeak()
		}
		cpu0 := p.cpu()
		var mid chan runtimeStats
		var before runtimeStats
		if p.proc != nil {
			before = p.proc.scrape()
			mid = make(chan runtimeStats, 1)
			go func() { time.Sleep(d / 2); mid <- p.proc.scrape() }()
		}
		var heapDone chan struct{}
		if p.proc == nil && p.name == "router" && midHeapProfile != "" {
			heapDone = make(chan struct{})
			go func() { time.Sleep(d / 2); writeProfile(midHeapProfile, "heap"); close(heapDone) }()
		}
		out[i] = measure(p.name, c, d, p.one)
		if heapDone != nil {
			<-heapDone // the profile is whole before the next round writes it
		}
		if mid != nil {
			st := <-mid
			out[i].Goroutines, out[i].HeapMB, out[i].StackMB = st.goroutines, st.heapMB, st.stackMB
		}
		if n := out[i].Requests; n > 0 {
			out[i].CPUus = (p.cpu() - cpu0) / float64(n) * 1e6
			if p.proc != nil {
				out[i].Allocs = (p.proc.scrape().mallocs - before.mallocs) / float64(n)
			}
		}
		if p.proc != nil {
			out[i].RSSMB = p.proc.peakRSSMB()
		}
		time.Sleep(200 * time.Millisecond) // let the last connections close before the next path
	}
	return out
}

// idleCPU is each router process's CPU with no requests at all: its
// background work (controller ticks, probes, saturation monitor), which
// every request's CPU figure also carries.
func idleCPU(paths []path, d time.Duration) map[string]float64 {
	out := map[string]float64{}
	var c0 []float64
	for _, p := range paths {
		c0 = append(c0, p.cpu())
	}
	time.Sleep(d)
	for i, p := range paths {
		if p.proc != nil {
			out[p.name] = (p.cpu() - c0[i]) / d.Seconds() * 1e3
		}
	}
	return out
}

// cpu is the CPU seconds that belong to the path: the router process's,
// or this process's for the paths without one.
func (p path) cpu() float64 {
	if p.proc != nil {
		return p.proc.cpuSeconds()
	}
	return selfCPUSeconds()
}

// measure runs c closed-loop clients of one for d and reports time to
// first token and throughput; the caller accounts CPU and memory.
func measure(path string, c int, d time.Duration, one func(*http.Client) (float64, error)) result {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2*c + 8}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var ttfbs []float64
	errs := 0
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
	sort.Float64s(ttfbs)
	r := result{Level: c, Path: path, Requests: len(ttfbs), Errors: errs, RPS: float64(len(ttfbs)) / elapsed}
	if n := len(ttfbs); n > 0 {
		r.P50ms, r.P99ms = ttfbs[n/2]*1e3, ttfbs[min(n-1, n*99/100)]*1e3
	}
	return r
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

func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
