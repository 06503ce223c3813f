// Command flood runs issue 29's two floods against narwhal-serve as its
// own process and checks that the process comes back: its descriptors,
// threads and resident memory (/proc/PID), and its goroutines and heap
// (go_goroutines and go_memstats_* from its /metrics), sampled before the
// flood, at its peak, once the flood's connections are all answered and
// closed, and 10, 30 and 60 s after.
//
//   - zero-byte: -conns connections (default 3,000) each sending a head
//     that declares Content-Length: 10 and no body, a quarter each to
//     GET /health, an unknown path, the admin drain and /v1/completions.
//   - refused-before-body: -refused connections (default 300) declaring a
//     body and sending none on requests refused before any body is read:
//     a Host the DNS-rebinding guard refuses, a completion not declared
//     JSON, a CORS preflight.
//   - slow-body: -slow attackers (default 200) on 127.0.0.1 trickling
//     completion bodies a byte every 100 ms, reconnecting when refused,
//     for -slow-for; a legitimate client on the same address sends
//     ordinary completions one after another meanwhile.
//
// The engines are simulated in this process; only the router is
// measured. It exits 1 unless, after each flood, descriptors and
// goroutines are within 10 % of the baseline (-slack, at least 2), the
// RSS never rises more than -rss-growth MiB above the flood's peak and is
// with -rss-bound, within that many MiB of the baseline at the last
// sample (the flood's heap stays resident until two GCs have run, the
// second freeing net/http's pooled buffers; on an idle router those are
// the runtime's forced GCs 2 minutes apart: docs/router.md "Slow and
// idle clients"), and the legitimate client got at least 90 % of its
// requests served.
//
//	go run ./bench/flood [-conns 3000] [-refused 300] [-slow 200] [-slow-for 10s] [-rss-growth 8] [-rss-bound MiB] [-marks 10s,30s,60s]
//	    [-router-bin PATH] [-body-read-timeout D] [-format text|json]
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/narwhal-go/narwhal/internal/httpguard"
)

// options are the command line.
type options struct {
	conns, slow       int
	refused           int
	slowFor           time.Duration
	bodyTimeout       time.Duration
	rssBoundMiB       float64
	rssGrowthMiB      float64
	slack             float64
	routerBin, format string
	memLimit          string
	marks             []time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.conns, "conns", 3000, "zero-byte flood: connections open at once")
	flag.IntVar(&o.refused, "refused", 300, "refused-before-body flood: connections (0: none)")
	flag.IntVar(&o.slow, "slow", 200, "slow-body flood: attackers trickling completion bodies at once")
	flag.DurationVar(&o.slowFor, "slow-for", 10*time.Second, "slow-body flood: how long the attackers and the legitimate client run")
	flag.DurationVar(&o.bodyTimeout, "body-read-timeout", 0, "narwhal-serve --body-read-timeout (default: its own default, 5 s)")
	flag.StringVar(&o.memLimit, "gomemlimit", "", "GOMEMLIMIT for narwhal-serve only (e.g. 64MiB): how a soft memory limit changes what it keeps")
	flag.Float64Var(&o.rssBoundMiB, "rss-bound", 0, "if set, RSS at the last -marks sample may exceed the baseline by at most this many MiB (it takes two GCs, about 4 minutes on an idle router, to come back: docs/router.md)")
	flag.Float64Var(&o.rssGrowthMiB, "rss-growth", 8, "RSS after a flood may exceed the flood's peak RSS by at most this many MiB")
	flag.Float64Var(&o.slack, "slack", 0.10, "descriptors and goroutines after a flood may exceed the baseline by this share (at least 2)")
	flag.StringVar(&o.routerBin, "router-bin", "", "narwhal-serve binary (default: go build ./cmd/narwhal-serve into a temporary directory)")
	flag.StringVar(&o.format, "format", "text", "report on stdout: text or json")
	marks := flag.String("marks", "10s,30s,60s", "when to sample after each flood, comma-separated; -rss-bound applies at the last")
	flag.Parse()
	var err error
	if o.marks, err = parseMarks(*marks); err != nil {
		fmt.Fprintln(os.Stderr, "flood: -marks:", err)
		os.Exit(2)
	}
	if o.format != "text" && o.format != "json" || o.conns < 4 || o.slow < 1 {
		fmt.Fprintln(os.Stderr, "flood: -format must be text or json, -conns at least 4, -slow at least 1")
		os.Exit(2)
	}
	if o.bodyTimeout == 0 {
		o.bodyTimeout = httpguard.DefaultBodyReadTimeout
	}
	rep, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
	if err := rep.write(os.Stdout, o.format); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
	if !rep.OK {
		os.Exit(1)
	}
}

func run(o options) (*report, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && int(lim.Cur) < max(o.conns, o.refused)+o.slow+200 {
		return nil, fmt.Errorf("descriptor limit %d is below -conns %d + -slow %d + 200: raise it (ulimit -n) or lower -conns", lim.Cur, o.conns, o.slow)
	}
	engines, err := startEngines(2)
	if err != nil {
		return nil, err
	}
	defer engines.Close()
	dir, err := os.MkdirTemp("", "narwhal-flood-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := o.routerBin
	if bin == "" {
		if bin, err = buildServe(dir); err != nil {
			return nil, err
		}
	}
	p, err := startServe(bin, dir, engines.URLs(), o.memLimit, "--body-read-timeout", o.bodyTimeout.String())
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := warmUp(p.base); err != nil {
		return nil, err
	}
	rep := &report{Date: time.Now().UTC().Format("2006-01-02"), Conns: o.conns, Slow: o.slow, SlowForS: o.slowFor.Seconds(),
		BodyTimeoutS: o.bodyTimeout.Seconds(), GOMEMLIMIT: o.memLimit, RSSBoundMiB: o.rssBoundMiB, RSSGrowthMiB: o.rssGrowthMiB, Slack: o.slack}
	rep.Phases = append(rep.Phases, runPhase(p, o, "zero-byte", func() floodResult { return zeroByteFlood(p.base, o, o.conns, zeroByteHeads) }))
	if o.refused > 0 {
		rep.Phases = append(rep.Phases, runPhase(p, o, "refused-before-body", func() floodResult {
			return zeroByteFlood(p.base, o, o.refused, refusedHeads)
		}))
	}
	rep.Phases = append(rep.Phases, runPhase(p, o, "slow-body", func() floodResult { return slowFlood(p.base, o) }))
	rep.judge()
	return rep, nil
}

// runPhase samples the router before, during (every 200 ms, the peak
// kept), when the flood has ended, the first moment from then on (up to
// 5 s) its descriptors and goroutines are back within the slack, and at
// each of o.marks after the flood's end.
func runPhase(p *routerProc, o options, name string, flood func() floodResult) phase {
	ph := phase{Name: name}
	before := p.sample("before")
	stop, peakc := make(chan struct{}), make(chan sample, 1)
	go func() {
		pk := before
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				peakc <- pk
				return
			case <-t.C:
				pk = peak(pk, p.sample("peak"))
			}
		}
	}()
	start := time.Now()
	ph.Flood = flood()
	end := time.Now()
	close(stop)
	pk := <-peakc
	pk.Label, pk.AtS = "peak", math.NaN() // the flood's duration, not one moment
	before.AtS = -end.Sub(start).Seconds()
	ph.Samples = append(ph.Samples, before, pk)
	fmt.Fprintf(os.Stderr, "flood: %s flood over after %.1f s; sampling for %v\n", name, end.Sub(start).Seconds(), o.marks[len(o.marks)-1])
	ph.Samples = append(ph.Samples, backWithin(p, before, o.slack, end))
	for _, m := range o.marks {
		time.Sleep(time.Until(end.Add(m)))
		s := p.sample(fmt.Sprintf("+%v", m))
		s.AtS = time.Since(end).Seconds()
		ph.Samples = append(ph.Samples, s)
	}
	return ph
}

// backWithin polls until descriptors and goroutines are within slack of
// before, for at most 5 s after end, and returns that sample.
func backWithin(p *routerProc, before sample, slack float64, end time.Time) sample {
	var s sample
	for {
		s = p.sample("after")
		s.AtS = time.Since(end).Seconds()
		if within(float64(s.FDs), float64(before.FDs), slack) && within(s.Goroutines, before.Goroutines, slack) || s.AtS > 5 {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// within says whether v exceeds base by at most share of it (at least 2,
// so a baseline of a dozen descriptors may gain a keep-alive connection).
func within(v, base, share float64) bool { return v <= base+max(base*share, 2) }

// parseMarks reads -marks: increasing durations after the flood's end.
func parseMarks(list string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(list, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 || len(out) > 0 && d <= out[len(out)-1] {
			return nil, fmt.Errorf("%q: want increasing positive durations, e.g. 10s,30s,60s", list)
		}
		out = append(out, d)
	}
	return out, nil
}
