package main

import (
	"strings"
	"testing"
)

// Ratios are taken inside each round, then summarized: the median and
// range of the per-round ratios, not the ratio of the medians.
func TestSummarizeTakesRatiosWithinRounds(t *testing.T) {
	round := func(twoLeg, router, baseline, cpuR, cpuB float64) []result {
		return []result{
			{Path: "two-leg", RPS: twoLeg, P50ms: 10},
			{Path: "router", RPS: router, P50ms: 12, CPUus: cpuR, RSSMB: 50},
			{Path: "baseline", RPS: baseline, P50ms: 15, CPUus: cpuB, RSSMB: 100},
		}
	}
	// Round 2 is slow for every path: the within-round ratio is unmoved.
	lr := summarize(200, [][]result{round(100, 80, 60, 300, 600), round(50, 40, 30, 330, 660), round(100, 90, 60, 300, 500)})
	if len(lr.Compare) != 3 {
		t.Fatalf("%d comparisons, want router and baseline ÷ two-leg, router ÷ baseline", len(lr.Compare))
	}
	rt, rb := lr.Compare[0], lr.Compare[2]
	if rt.Of != "router" || rt.To != "two-leg" || rt.RPSRatio != (spread{Median: 0.8, Min: 0.8, Max: 0.9}) {
		t.Errorf("router ÷ two-leg %+v, want median 0.8 in [0.8, 0.9]", rt)
	}
	if rt.AddedP50ms.Median != 2 || rt.CPURatio != nil {
		t.Errorf("added p50 %v, cpu %v; want +2 ms and no CPU ratio against a path without a router process", rt.AddedP50ms, rt.CPURatio)
	}
	if rb.Of != "router" || rb.To != "baseline" || rb.CPURatio == nil || rb.CPURatio.Median != 0.5 || rb.CPURatio.Max != 0.6 || rb.RSSRatio.Median != 0.5 {
		t.Errorf("router ÷ baseline %+v, want CPU 0.5 [0.5, 0.6] and RSS 0.5", rb)
	}
	if m := lr.Paths[1]; m.RPS != 80 || m.CPUus != 300 {
		t.Errorf("router medians %+v, want 80 req/s and 300 µs", m)
	}
}

// With -routers-only there is no two-leg path to compare with.
func TestSummarizeRoutersOnly(t *testing.T) {
	lr := summarize(1, [][]result{{{Path: "router", RPS: 10, CPUus: 1}, {Path: "baseline", RPS: 10, CPUus: 2}}})
	if len(lr.Compare) != 1 || lr.Compare[0].To != "baseline" {
		t.Fatalf("comparisons %+v, want only router ÷ baseline", lr.Compare)
	}
	var b strings.Builder
	if err := (report{Levels: []levelReport{lr}}).text(&b); err != nil || !strings.Contains(b.String(), "router ÷ baseline") {
		t.Fatalf("text report %q (%v)", b.String(), err)
	}
}

// With the relay measured, each router is also compared with it, CPU and
// RSS included (both are processes of their own).
func TestSummarizeAgainstTheRelay(t *testing.T) {
	round := []result{{Path: "two-leg", RPS: 100}, {Path: "relay", RPS: 100, CPUus: 50, RSSMB: 10},
		{Path: "router", RPS: 90, CPUus: 200, RSSMB: 60}}
	lr := summarize(50, [][]result{round})
	if len(lr.Compare) != 2 {
		t.Fatalf("comparisons %+v, want router ÷ two-leg and router ÷ relay", lr.Compare)
	}
	c := lr.Compare[1]
	if c.Of != "router" || c.To != "relay" || c.CPURatio == nil || c.CPURatio.Median != 4 || c.RSSRatio.Median != 6 || c.RPSRatio.Median != 0.9 {
		t.Errorf("router ÷ relay %+v, want CPU 4×, RSS 6×, req/s 0.9×", c)
	}
}
