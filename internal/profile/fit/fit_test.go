package fit

import (
	"math"
	"strings"
	"testing"
)

func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(math.Abs(want), 1e-15) {
		t.Errorf("%s = %g, want %g (±%.0f%%)", name, got, want, tol*100)
	}
}

func curve(a, b, c float64, block int, split float64, ns ...int) []Point {
	var pts []Point
	for _, n := range ns {
		x := float64(n)
		pts = append(pts, Point{Tokens: n, Seconds: a*x*x + b*x + c + split*splitRule(n, block)})
	}
	return pts
}

func TestFitPrefill(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pts       []Point
		block     int
		a, b, c   float64
		split     float64
		wantBlock int
		zeroA     bool // the unconstrained fit would make a negative
		wantErr   string
	}{
		{name: "exact quadratic", pts: curve(2e-8, 6e-5, 0.015, 0, 0, 256, 1024, 2048, 4096), a: 2e-8, b: 6e-5, c: 0.015},
		{name: "negative curvature clamps a to zero", pts: []Point{{256, 0.05}, {1024, 0.07}, {2048, 0.095}, {4096, 0.13}}, zeroA: true},
		{name: "split kept when it halves the error", pts: curve(1e-8, 2e-5, 0.02, 16, 0.03, 256, 700, 1024, 1300, 2300, 4096),
			block: 16, a: 1e-8, b: 2e-5, c: 0.02, split: 0.03, wantBlock: 16},
		{name: "split dropped on a smooth curve", pts: curve(1e-8, 2e-5, 0.02, 0, 0, 256, 700, 1024, 1300, 2300, 4096),
			block: 16, a: 1e-8, b: 2e-5, c: 0.02},
		{name: "too few lengths", pts: curve(1e-8, 2e-5, 0.02, 0, 0, 256, 1024), wantErr: "≥ 3 distinct lengths"},
		{name: "wild points fail acceptance", pts: []Point{{256, 0.01}, {512, 1}, {1024, 0.02}, {2048, 2}}, wantErr: "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := FitPrefill(tc.pts, tc.block)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.A < 0 || f.B < 0 || f.C < 0 {
				t.Fatalf("negative coefficient: %+v", f)
			}
			if tc.zeroA && f.A != 0 {
				t.Fatalf("a = %g on a concave curve, want the constraint to hold it at 0", f.A)
			}
			if tc.a != 0 {
				near(t, "a", f.A, tc.a, 1e-6)
				near(t, "b", f.B, tc.b, 1e-6)
				near(t, "c", f.C, tc.c, 1e-6)
			}
			if f.BlockTokens != tc.wantBlock {
				t.Fatalf("block = %d, want %d", f.BlockTokens, tc.wantBlock)
			}
			if tc.wantBlock > 0 {
				near(t, "split", f.Split, tc.split, 1e-6)
			}
		})
	}
}

func plane(slope, rs, c float64, lens, qs []int) []Cell {
	var cells []Cell
	for _, l := range lens {
		for _, q := range qs {
			k := q * (l + 8)
			cells = append(cells, Cell{InputTokens: l, Requests: q, ResidentKV: k, Seconds: slope*float64(k) + rs*float64(q) + c})
		}
	}
	return cells
}

func TestFitDecode(t *testing.T) {
	lim := Limits{MaxFitMAPE: 0.05, MaxCVMAPE: 0.13}
	d, err := FitDecode(plane(2e-6, 1e-3, 0.01, []int{256, 1024}, []int{1, 4}), lim)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "slope", d.Slope, 2e-6, 1e-6)
	near(t, "request slope", d.RequestSlope, 1e-3, 1e-6)
	near(t, "intercept", d.Intercept, 0.01, 1e-6)
	if d.FitMAPE > 1e-9 || d.CVMAPE > 1e-9 {
		t.Fatalf("exact plane has errors %v %v", d.FitMAPE, d.CVMAPE)
	}

	noisy := plane(2e-6, 1e-3, 0.01, []int{256, 1024}, []int{1, 4, 8})
	for i := range noisy {
		noisy[i].Seconds *= 1 + 0.4*float64(i%2*2-1)
	}
	if _, err := FitDecode(noisy, lim); err == nil || !strings.Contains(err.Error(), "decode_fit_mape") {
		t.Fatalf("noisy plane: err = %v, want a decode_fit_mape refusal", err)
	}

	for _, tc := range []struct {
		name  string
		cells []Cell
		want  string
	}{
		{"one concurrency", plane(2e-6, 1e-3, 0.01, []int{256, 1024, 2048}, []int{4}), "request axis"},
		{"one length", plane(2e-6, 1e-3, 0.01, []int{256}, []int{1, 4, 8}), "KV-token axis"},
		{"too few cells", plane(2e-6, 1e-3, 0.01, []int{256}, []int{1, 4}), "≥ 3 cells"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := FitDecode(tc.cells, lim); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestFitWarm(t *testing.T) {
	a, b, c, d := 1e-8, 2e-5, 0.03, 1e-6
	var cases []WarmCase
	for _, p := range []int{1024, 2048} {
		for _, s := range []int{256, 512, 1024} {
			P, S := float64(p), float64(s)
			cases = append(cases, WarmCase{Prefix: p, Suffix: s, Seconds: a*(2*P*S+S*S) + b*S + d*P + c})
		}
	}
	w, err := FitWarm(cases, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "a'", w.A, a, 1e-6)
	near(t, "b'", w.B, b, 1e-6)
	near(t, "c'", w.C, c, 1e-6)
	near(t, "d'", w.D, d, 1e-6)
	if w.MinP != 1024 || w.MaxP != 2048 || w.MinS != 256 || w.MaxS != 1024 {
		t.Fatalf("domain %+v", w)
	}
	if _, err := FitWarm(cases[:4], 0, 0); err == nil {
		t.Fatal("4 cases accepted")
	}
}

func TestMedian(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Fatal(m)
	}
	if m := Median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Fatal(m)
	}
}
