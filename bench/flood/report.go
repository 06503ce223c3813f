package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// report is one run: the setup, each flood's samples and the verdict.
type report struct {
	Date         string   `json:"date"`
	Conns        int      `json:"zero_byte_conns"`
	Slow         int      `json:"slow_attackers"`
	SlowForS     float64  `json:"slow_for_s"`
	BodyTimeoutS float64  `json:"body_read_timeout_s"`
	GOMEMLIMIT   string   `json:"gomemlimit,omitempty"`
	RSSBoundMiB  float64  `json:"rss_bound_mib"`
	RSSGrowthMiB float64  `json:"rss_growth_mib"`
	Slack        float64  `json:"slack"`
	Phases       []phase  `json:"phases"`
	OK           bool     `json:"ok"`
	Failures     []string `json:"failures,omitempty"`
}

// phase is one flood: its samples in order (before, peak, after, then one
// per mark) and its answers.
type phase struct {
	Name    string      `json:"name"`
	Samples []sample    `json:"samples"`
	Flood   floodResult `json:"flood"`
}

// judge checks the must-hold of issue 29 on every phase: descriptors and
// goroutines back within the slack once the flood is over ("after"), RSS
// never more than RSSGrowthMiB above the flood's peak after it and within
// RSSBoundMiB of the baseline at the last mark, every flood connection answered and
// closed, the legitimate client served at least 90 %.
func (r *report) judge() {
	r.Failures = nil
	for _, ph := range r.Phases {
		if len(ph.Samples) < 4 {
			r.Failures = append(r.Failures, ph.Name+": too few samples")
			continue
		}
		before, pk, after, last := ph.Samples[0], ph.Samples[1], ph.Samples[2], ph.Samples[len(ph.Samples)-1]
		if !within(float64(after.FDs), float64(before.FDs), r.Slack) {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: %d descriptors %.1f s after the flood, baseline %d", ph.Name, after.FDs, after.AtS, before.FDs))
		}
		if !within(after.Goroutines, before.Goroutines, r.Slack) {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: %.0f goroutines %.1f s after the flood, baseline %.0f", ph.Name, after.Goroutines, after.AtS, before.Goroutines))
		}
		for _, s := range ph.Samples[2:] {
			if s.RSSMiB > pk.RSSMiB+r.RSSGrowthMiB {
				r.Failures = append(r.Failures, fmt.Sprintf("%s: RSS %.1f MiB at %s, above the flood's peak %.1f + %.0f", ph.Name, s.RSSMiB, s.Label, pk.RSSMiB, r.RSSGrowthMiB))
			}
		}
		if r.RSSBoundMiB > 0 && last.RSSMiB > before.RSSMiB+r.RSSBoundMiB {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: RSS %.1f MiB at %s, baseline %.1f + bound %.0f", ph.Name, last.RSSMiB, last.Label, before.RSSMiB, r.RSSBoundMiB))
		}
		if n := ph.Flood.Answers[0] + sum(ph.Flood.LeftOpen); n > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: %d flood connections not answered and closed in time", ph.Name, n))
		}
		if ph.Flood.Legit > 0 && ph.Flood.LegitOK*10 < ph.Flood.Legit*9 {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: legitimate client served %d/%d, want ≥ 90 %%", ph.Name, ph.Flood.LegitOK, ph.Flood.Legit))
		}
	}
	r.OK = len(r.Failures) == 0
}

func (r *report) write(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "narwhal-serve under floods, %s: %d zero-byte connections; %d slow-body attackers for %.0f s; body read timeout %.0f s\n",
		r.Date, r.Conns, r.Slow, r.SlowForS, r.BodyTimeoutS)
	if r.GOMEMLIMIT != "" {
		fmt.Fprintf(w, "narwhal-serve ran with GOMEMLIMIT=%s\n", r.GOMEMLIMIT)
	}
	for _, ph := range r.Phases {
		fmt.Fprintf(w, "\n%s: answers %s; slowest close %.2f s", ph.Name, answers(ph.Flood.Answers), ph.Flood.SlowestS)
		if len(ph.Flood.LeftOpen) > 0 {
			fmt.Fprintf(w, "; answered but left open: %s", answers(ph.Flood.LeftOpen))
		}
		if ph.Flood.Legit > 0 {
			fmt.Fprintf(w, "; legitimate client %d/%d served", ph.Flood.LegitOK, ph.Flood.Legit)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "sample\tt (s)\tfds\tthreads\tgoroutines\tRSS MiB\theap inuse\theap idle\theap released\tstack\tnext GC\tGCs\t")
		for _, s := range ph.Samples {
			at := "during"
			if !math.IsNaN(s.AtS) {
				at = fmt.Sprintf("%.1f", s.AtS)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t\n", s.Label, at, s.FDs, s.Threads, s.Goroutines,
				s.RSSMiB, s.HeapInuseMiB, s.HeapIdleMiB, s.HeapReleasedMiB, s.StackMiB, s.NextGCMiB, s.GCs)
		}
		tw.Flush()
	}
	if r.OK {
		fmt.Fprintf(w, "\nOK: descriptors and goroutines within %.0f %% (at least 2) of the baseline after each flood; RSS never above the peak + %.0f MiB (bound to the baseline: %.0f MiB, 0 = none); legitimate client ≥ 90 %%\n",
			r.Slack*100, r.RSSGrowthMiB, r.RSSBoundMiB)
		return nil
	}
	fmt.Fprintf(w, "\nFAIL:\n  %s\n", strings.Join(r.Failures, "\n  "))
	return nil
}

// answers is a status count as "408 × 2250, 429 × 742".
func answers(m map[int]int) string {
	var keys []int
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		name := fmt.Sprint(k)
		if k == 0 {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s × %d", name, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sum(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
