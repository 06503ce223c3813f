package main

import (
	"math"
	"strings"
	"testing"
)

// The verdict is the must-hold: each figure that misses its bound
// fails the run and is named.
func TestJudgeNamesEachMissedBound(t *testing.T) {
	base := sample{Label: "before", FDs: 13, Goroutines: 12, RSSMiB: 30}
	good := func() phase {
		return phase{Name: "slow-body",
			Samples: []sample{base, {Label: "peak", AtS: math.NaN(), FDs: 400, Goroutines: 400, RSSMiB: 80},
				{Label: "after", FDs: 14, Goroutines: 13, RSSMiB: 70}, {Label: "+60s", FDs: 13, Goroutines: 12, RSSMiB: 50}},
			Flood: floodResult{Answers: map[int]int{408: 10, 429: 90}, Legit: 100, LegitOK: 95}}
	}
	for _, tc := range []struct {
		name string
		mod  func(*phase)
		want string // "" : passes
	}{
		{"within every bound", func(*phase) {}, ""},
		{"descriptors left over", func(p *phase) { p.Samples[2].FDs = 16 }, "16 descriptors"},
		{"goroutines within the 2 floor", func(p *phase) { p.Samples[2].Goroutines = 14 }, ""},
		{"goroutines left over", func(p *phase) { p.Samples[2].Goroutines = 15 }, "15 goroutines"},
		{"RSS above the bound at the last mark", func(p *phase) { p.Samples[3].RSSMiB = 55 }, "RSS 55.0 MiB at +60s, baseline"},
		{"RSS grows past the flood's peak", func(p *phase) { p.Samples[2].RSSMiB = 89 }, "RSS 89.0 MiB at after, above the flood's peak"},
		{"a connection never answered", func(p *phase) { p.Flood.Answers[0] = 1 }, "1 flood connections not answered"},
		{"a connection left open", func(p *phase) { p.Flood.LeftOpen = map[int]int{415: 2} }, "2 flood connections not answered"},
		{"legitimate client under 90 %", func(p *phase) { p.Flood.LegitOK = 89 }, "served 89/100"},
		{"too few samples", func(p *phase) { p.Samples = p.Samples[:2] }, "too few samples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ph := good()
			tc.mod(&ph)
			r := report{RSSBoundMiB: 24, RSSGrowthMiB: 8, Slack: 0.10, Phases: []phase{ph}}
			r.judge()
			got := strings.Join(r.Failures, "; ")
			if tc.want == "" && !r.OK || tc.want != "" && (r.OK || !strings.Contains(got, tc.want)) {
				t.Errorf("ok %v, failures %q; want ok %v naming %q", r.OK, got, tc.want == "", tc.want)
			}
		})
	}
}

func TestParseMarks(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{{"10s,30s,60s", true}, {"2s", true}, {"30s,10s", false}, {"10s,10s", false}, {"0s", false}, {"ten", false}} {
		if _, err := parseMarks(tc.in); (err == nil) != tc.ok {
			t.Errorf("parseMarks(%q): error %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

// Without -rss-bound the RSS is only held to the flood's peak: the heap
// a flood leaves stays resident until two GCs have run.
func TestJudgeWithoutBaselineBound(t *testing.T) {
	r := report{RSSGrowthMiB: 8, Slack: 0.10, Phases: []phase{{Name: "zero-byte",
		Samples: []sample{{FDs: 13, Goroutines: 12, RSSMiB: 27}, {RSSMiB: 88}, {FDs: 13, Goroutines: 12, RSSMiB: 90}, {RSSMiB: 91}},
		Flood:   floodResult{Answers: map[int]int{408: 10}}}}}
	if r.judge(); !r.OK {
		t.Errorf("failures %q; want none: RSS 91 MiB is within the peak 88 + 8 and no baseline bound is set", r.Failures)
	}
	r.RSSBoundMiB = 32
	if r.judge(); r.OK {
		t.Error("RSS 91 MiB passed a baseline bound of 27 + 32 MiB")
	}
}
