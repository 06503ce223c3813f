package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
)

// report is the whole run, as -format json prints it.
type report struct {
	Setup setup `json:"setup"`
	// Idle is each router process's CPU in ms per second with no load.
	Idle   map[string]float64 `json:"idle_cpu_ms_per_s,omitempty"`
	Levels []levelReport      `json:"levels"`
}

type setup struct {
	PrefillMS   float64 `json:"prefill_ms"`
	DecodeMS    float64 `json:"decode_step_ms"`
	Tokens      int     `json:"output_tokens"`
	Engines     int     `json:"engines"`
	DurationS   float64 `json:"duration_s_per_path"`
	Rounds      int     `json:"rounds"`
	RouterBin   string  `json:"router_bin,omitempty"`
	BaselineBin string  `json:"baseline_bin,omitempty"`
}

// levelReport is one concurrency level: each path's medians over the
// rounds, and the same-round comparisons.
type levelReport struct {
	Concurrency int          `json:"concurrency"`
	Paths       []result     `json:"paths"`
	Compare     []comparison `json:"compare"`
}

// spread is a per-round figure's median and range over the rounds.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// comparison is Of against To, each figure taken inside one round.
type comparison struct {
	Of         string  `json:"of"`
	To         string  `json:"to"`
	RPSRatio   spread  `json:"requests_per_s_ratio"`
	AddedP50ms spread  `json:"added_ttfb_ms_p50"`
	AddedP99ms spread  `json:"added_ttfb_ms_p99"`
	CPURatio   *spread `json:"router_cpu_ratio,omitempty"`
	RSSRatio   *spread `json:"peak_rss_ratio,omitempty"`
}

// summarize takes the medians of each path over the rounds and compares
// the routers with two-leg and with the relay (the floor), and the router
// with the baseline.
func summarize(c int, rounds [][]result) levelReport {
	lr := levelReport{Concurrency: c}
	for i := range rounds[0] {
		lr.Paths = append(lr.Paths, medianOf(rounds, i))
	}
	idx := map[string]int{}
	for i, r := range rounds[0] {
		idx[r.Path] = i
	}
	for _, of := range []string{"router", "baseline"} {
		if _, ok := idx[of]; !ok {
			continue
		}
		if _, base := idx["two-leg"]; base {
			lr.Compare = append(lr.Compare, compare(rounds, idx[of], idx["two-leg"], false))
		}
		if _, floor := idx["relay"]; floor { // both processes: CPU and RSS compare too
			lr.Compare = append(lr.Compare, compare(rounds, idx[of], idx["relay"], true))
		}
	}
	if _, ok := idx["baseline"]; ok {
		lr.Compare = append(lr.Compare, compare(rounds, idx["router"], idx["baseline"], true))
	}
	return lr
}

func compare(rounds [][]result, of, to int, procs bool) comparison {
	cmp := comparison{Of: rounds[0][of].Path, To: rounds[0][to].Path}
	figure := func(f func(a, b result) float64) spread {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = f(r[of], r[to])
		}
		return spreadOf(v)
	}
	cmp.RPSRatio = figure(func(a, b result) float64 { return ratio(a.RPS, b.RPS) })
	cmp.AddedP50ms = figure(func(a, b result) float64 { return a.P50ms - b.P50ms })
	cmp.AddedP99ms = figure(func(a, b result) float64 { return a.P99ms - b.P99ms })
	if procs {
		cpu := figure(func(a, b result) float64 { return ratio(a.CPUus, b.CPUus) })
		rss := figure(func(a, b result) float64 { return ratio(a.RSSMB, b.RSSMB) })
		cmp.CPURatio, cmp.RSSRatio = &cpu, &rss
	}
	return cmp
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func spreadOf(v []float64) spread {
	sort.Float64s(v)
	return spread{Median: v[len(v)/2], Min: v[0], Max: v[len(v)-1]}
}

// medianOf is path i's figures, each the median over the rounds; counts
// are summed.
func medianOf(rounds [][]result, i int) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rounds))
		for k, r := range rounds {
			v[k] = f(r[i])
		}
		return spreadOf(v).Median
	}
	m := rounds[0][i]
	m.P50ms = pick(func(r result) float64 { return r.P50ms })
	m.P99ms = pick(func(r result) float64 { return r.P99ms })
	m.RPS = pick(func(r result) float64 { return r.RPS })
	m.CPUus = pick(func(r result) float64 { return r.CPUus })
	m.RSSMB = pick(func(r result) float64 { return r.RSSMB })
	m.Goroutines = pick(func(r result) float64 { return r.Goroutines })
	m.HeapMB = pick(func(r result) float64 { return r.HeapMB })
	m.StackMB = pick(func(r result) float64 { return r.StackMB })
	m.Allocs = pick(func(r result) float64 { return r.Allocs })
	m.Requests, m.Errors = 0, 0
	for _, r := range rounds {
		m.Requests += r[i].Requests
		m.Errors += r[i].Errors
	}
	return m
}

// write prints the report in the chosen format and saves -json.
func (rep report) write(o options) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if o.jsonOut != "" {
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	if o.format == "json" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return rep.text(os.Stdout)
}

func (rep report) text(w io.Writer) error {
	s := rep.Setup
	fmt.Fprintf(w, "engines %d (%.2g ms prefill, %.2g ms decode step), %d output tokens, %d rounds of %.0f s per path; medians, [min–max] over rounds\n\n",
		s.Engines, s.PrefillMS, s.DecodeMS, s.Tokens, s.Rounds, s.DurationS)
	for _, name := range []string{"router", "baseline", "relay"} {
		if v, ok := rep.Idle[name]; ok {
			fmt.Fprintf(w, "%s idle: %.1f ms CPU per second\n", name, v)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tpath\tttfb p50 ms\tttfb p99 ms\treq/s\terrors\tcpu µs/req\tallocs/req\tpeak RSS MB\theap MB\tstacks MB\tgoroutines\t")
	for _, l := range rep.Levels {
		for _, r := range l.Paths {
			mem := "-\t-\t-\t-\t-"
			if r.RSSMB > 0 {
				mem = fmt.Sprintf("%.0f\t%.0f\t%.0f\t%.0f\t%.0f", r.Allocs, r.RSSMB, r.HeapMB, r.StackMB, r.Goroutines)
			}
			fmt.Fprintf(tw, "%d\t%s\t%.2f\t%.2f\t%.0f\t%d\t%.0f\t%s\t\n", l.Concurrency, r.Path, r.P50ms, r.P99ms, r.RPS, r.Errors, r.CPUus, mem)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\ncpu µs/req: the process's own for router, baseline and relay; this process's (the clients, and the engines with -engines-inprocess) for direct and two-leg")
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tcompare\treq/s ratio\tadded ttfb p50 ms\tadded ttfb p99 ms\tcpu ratio\tRSS ratio\t")
	for _, l := range rep.Levels {
		for _, c := range l.Compare {
			cpu, rss := "-", "-"
			if c.CPURatio != nil {
				cpu, rss = c.CPURatio.fmt("%.2f×"), c.RSSRatio.fmt("%.2f×")
			}
			fmt.Fprintf(tw, "%d\t%s ÷ %s\t%s\t%s\t%s\t%s\t%s\t\n", l.Concurrency, c.Of, c.To, c.RPSRatio.fmt("%.2f×"),
				c.AddedP50ms.fmt("%+.2f"), c.AddedP99ms.fmt("%+.2f"), cpu, rss)
		}
	}
	return tw.Flush()
}

func (s spread) fmt(f string) string {
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", s.Median, s.Min, s.Max)
}
