package ui

import (
	"math"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/metrics"
)

func hist(counts ...uint64) metrics.Histogram {
	h := metrics.Histogram{Bounds: []float64{0.1, 0.2, 0.4, 1}, Counts: counts}
	h.Count = counts[len(counts)-1]
	return h
}

func TestQuantile(t *testing.T) {
	zero := hist(0, 0, 0, 0)
	cases := []struct {
		name string
		q    float64
		a, b metrics.Histogram
		want *float64
	}{
		{"empty window", 0.5, hist(3, 3, 3, 3), hist(3, 3, 3, 3), nil},
		{"all in the first bucket", 0.5, zero, hist(10, 10, 10, 10), ptr(0.05)},
		{"interpolated in the second", 0.95, zero, hist(50, 100, 100, 100), ptr(0.19)},
		{"only the window's observations", 0.5, hist(100, 100, 100, 100), hist(100, 100, 110, 110), ptr(0.3)},
		{"past the last bound", 0.99, zero, func() metrics.Histogram { h := hist(0, 0, 0, 1); h.Count = 10; return h }(), ptr(1)},
	}
	for _, c := range cases {
		got := quantile(c.q, c.a, c.b)
		switch {
		case c.want == nil && got != nil:
			t.Errorf("%s: %g, want none", c.name, *got)
		case c.want != nil && (got == nil || math.Abs(*got-*c.want) > 1e-9):
			t.Errorf("%s: %v, want %g", c.name, got, *c.want)
		}
	}
}

func ptr(v float64) *float64 { return &v }

// Windows difference samples: attainment and goodput over what ended in
// the window only.
func TestWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := sample{at: t0, ended: 10, met: 5, served: 8, ttft: hist(0, 0, 0, 0), tpot: hist(0, 0, 0, 0)}
	b := sample{at: t0.Add(10 * time.Second), ended: 30, met: 20, served: 26, ttft: hist(20, 20, 20, 20), tpot: hist(0, 0, 0, 0)}
	w := window(a, b)
	if w.Ended != 20 || w.Attainment == nil || *w.Attainment != 0.75 || w.Goodput != 1.5 || w.Throughput != 1.8 {
		t.Errorf("window %+v", w)
	}
	if w.TTFT.P50 == nil || w.TPOT.P50 != nil {
		t.Errorf("ttft %+v tpot %+v: want ttft quantiles only", w.TTFT, w.TPOT)
	}
	var r ring
	for i := 0; i < 12; i++ {
		r.add(sample{at: t0.Add(time.Duration(i) * time.Second), ended: i, met: i}, 10)
	}
	if len(r.s) != 10 || r.s[0].ended != 2 {
		t.Fatalf("ring holds %d from %d, want the latest 10", len(r.s), r.s[0].ended)
	}
	pts := r.series(3 * time.Second)
	if len(pts) != 3 || pts[len(pts)-1].AgoS != 0 || pts[0].Goodput != 1 {
		t.Errorf("series %+v", pts)
	}
}
