package lifecycle

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

var three = []string{"d0", "d1", "d2"}

// under marks an engine that gets no samples in a window.
var under = math.NaN()

// runWindows feeds one 10 s window per entry: three samples per engine
// (min_samples 3) at the given residual, then closes it. It returns the
// verdicts as "window:iid:action".
func runWindows(d *Drift, windows []map[string]float64) []string {
	var got []string
	d.Observe(0, nil)
	for w, res := range windows {
		t0 := float64(10 * w)
		for k := 1; k <= 3; k++ {
			var s []Sample
			for _, iid := range d.order {
				if r, ok := res[iid]; ok && !math.IsNaN(r) {
					s = append(s, Sample{IID: iid, Residual: r, OK: true})
				}
			}
			d.Observe(t0+float64(k), s)
		}
		for _, v := range d.Observe(t0+10, nil) {
			got = append(got, fmt.Sprintf("%d:%s:%s", w, v.IID, v.Action))
		}
	}
	return got
}

func repeat(n int, m map[string]float64) []map[string]float64 {
	out := make([]map[string]float64, n)
	for i := range out {
		out[i] = m
	}
	return out
}

func cat(parts ...[]map[string]float64) []map[string]float64 { return slices.Concat(parts...) }

func healthCfg(mod func(*fleet.Health)) fleet.Health {
	h := fleet.Defaults().Recovery.Health
	h.WindowS = 10
	if mod != nil {
		mod(&h)
	}
	return h
}

func TestDriftTracker(t *testing.T) {
	slow := map[string]float64{"d0": 5, "d1": 1, "d2": 1}
	fine := map[string]float64{"d0": 1, "d1": 1, "d2": 1}
	for _, tc := range []struct {
		name    string
		mod     func(*fleet.Health)
		windows []map[string]float64
		want    []string
	}{
		{name: "healthy fleet", windows: repeat(8, fine)},
		{name: "steady drift: probation at 3, evict from 5",
			windows: repeat(6, slow),
			want:    []string{"2:d0:probation_started", "4:d0:evict", "5:d0:evict"}},
		{name: "probation clears after 3 healthy windows",
			windows: cat(repeat(3, slow), repeat(3, fine)),
			want:    []string{"2:d0:probation_started", "5:d0:probation_ended"}},
		{name: "a healthy window ends the drifting streak",
			windows: cat(repeat(2, slow), repeat(1, fine), repeat(2, slow)),
		},
		{name: "a drifting window restarts the recovery count",
			windows: cat(repeat(3, slow), repeat(2, fine), repeat(1, slow), repeat(3, fine)),
			want:    []string{"2:d0:probation_started", "8:d0:probation_ended"}},
		{name: "undersampled windows neither drift nor heal",
			windows: cat(repeat(2, slow), repeat(2, map[string]float64{"d0": under, "d1": 1, "d2": 1}), repeat(1, slow)),
			want:    []string{"4:d0:probation_started"}},
		{name: "fleet-wide surge is vetoed",
			windows: repeat(6, map[string]float64{"d0": 5, "d1": 5, "d2": 5})},
		{name: "an outlier beyond relative_band × the peer median is not vetoed",
			windows: repeat(3, map[string]float64{"d0": 20, "d1": 5, "d2": 5}),
			want:    []string{"2:d0:probation_started"}},
		{name: "relative_band 0 turns the veto off",
			mod:     func(h *fleet.Health) { h.RelativeBand = 0 },
			windows: repeat(3, map[string]float64{"d0": 5, "d1": 5, "d2": 5}),
			want:    []string{"2:d0:probation_started", "2:d1:probation_started", "2:d2:probation_started"}},
		{name: "fewer than 3 scored engines cannot veto",
			windows: repeat(3, map[string]float64{"d0": 5, "d1": 5, "d2": under}),
			want:    []string{"2:d0:probation_started", "2:d1:probation_started"}},
		{name: "the healthy baseline raises the band",
			windows: cat(repeat(8, map[string]float64{"d0": 1.9, "d1": 1, "d2": 1}), repeat(3, map[string]float64{"d0": 3, "d1": 1, "d2": 1}))},
		{name: "without a raised baseline the same pace drifts",
			windows: repeat(3, map[string]float64{"d0": 3, "d1": 1, "d2": 1}),
			want:    []string{"2:d0:probation_started"}},
		{name: "the baseline is floored at 1",
			windows: cat(repeat(8, map[string]float64{"d0": 0.2, "d1": 1, "d2": 1}), repeat(3, map[string]float64{"d0": 1.9, "d1": 1, "d2": 1}))},
		{name: "drift_band and the window counts are the fleet's",
			mod:     func(h *fleet.Health) { h.DriftBand, h.ProbationWindows, h.EvictWindows = 6, 1, 2 },
			windows: cat(repeat(2, fine), repeat(2, map[string]float64{"d0": 7, "d1": 1, "d2": 1})),
			want:    []string{"2:d0:probation_started", "3:d0:evict"}},
		{name: "a wider drift_band tolerates the same pace",
			mod:     func(h *fleet.Health) { h.DriftBand, h.ProbationWindows, h.EvictWindows = 8, 1, 2 },
			windows: cat(repeat(2, fine), repeat(2, map[string]float64{"d0": 7, "d1": 1, "d2": 1}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runWindows(NewDrift(healthCfg(tc.mod), three), tc.windows)
			if !slices.Equal(got, tc.want) {
				t.Errorf("verdicts %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDriftWindowsNeedMinSamplesAndSkipPrefillPauses(t *testing.T) {
	d := NewDrift(healthCfg(nil), three)
	d.Observe(0, nil)
	for k := 1; k <= 5; k++ { // five passes, but only two scorable
		d.Observe(float64(k), []Sample{{IID: "d0", Residual: 9, OK: k <= 2, Paused: k > 3}})
	}
	d.Observe(10, nil)
	st := d.States()["d0"]
	if st.Scored != 0 || st.Undersampled != 1 || st.PrefillPauses != 2 {
		t.Errorf("state %+v, want 0 scored, 1 undersampled, 2 prefill pauses", st)
	}
}

func TestDriftResetEndsProbationKeepsBaseline(t *testing.T) {
	d := NewDrift(healthCfg(nil), three)
	runWindows(d, cat(repeat(4, map[string]float64{"d0": 1.8, "d1": 1, "d2": 1}), repeat(3, map[string]float64{"d0": 9, "d1": 1, "d2": 1})))
	if p := d.Probation(); !slices.Equal(p, []string{"d0"}) {
		t.Fatalf("probation %v, want [d0]", p)
	}
	base := d.States()["d0"].Baseline
	if !d.Reset("d0") || d.Reset("d0") {
		t.Error("Reset reports whether the engine was on probation")
	}
	if st := d.States()["d0"]; st.Probation || st.Drifting != 0 || st.Baseline != base || base <= 1 {
		t.Errorf("after Reset: %+v (baseline before %v)", st, base)
	}
}

// The tracker is a pure function of its inputs: the same observations
// give the same verdicts.
func TestDriftIsDeterministic(t *testing.T) {
	w := cat(repeat(3, map[string]float64{"d0": 4, "d1": 1.2, "d2": 0.9}), repeat(4, map[string]float64{"d0": 1, "d1": 1, "d2": 1}))
	a := runWindows(NewDrift(healthCfg(nil), three), w)
	b := runWindows(NewDrift(healthCfg(nil), three), w)
	if !slices.Equal(a, b) || len(a) == 0 {
		t.Errorf("runs differ or are empty: %v vs %v", a, b)
	}
}
