package fleet

import "testing"

// TestSLOMet is the per-request rule of operations.md §8.2: the full
// requested output, TTFT at or under slo.ttft_s, and TPOT null (fewer than
// two tokens) or at or under slo.tpot_s.
func TestSLOMet(t *testing.T) {
	slo := SLO{TTFT: 2, TPOT: 0.05}
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name       string
		complete   bool
		ttft, tpot *float64
		want       bool
	}{
		{"within both", true, f(1), f(0.04), true},
		{"on both targets", true, f(2), f(0.05), true},
		{"one token: no TPOT", true, f(1), nil, true},
		{"TTFT over", true, f(2.001), f(0.04), false},
		{"TPOT over", true, f(1), f(0.051), false},
		{"output cut short", false, f(1), f(0.04), false},
		{"no first token measured", true, nil, nil, false},
	}
	for _, tc := range tests {
		if got := slo.Met(tc.complete, tc.ttft, tc.tpot); got != tc.want {
			t.Errorf("%s: Met = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSaturationThreshold(t *testing.T) {
	if got := (SLO{TTFT: 2}).SaturationThreshold(); got != 0.5 {
		t.Fatalf("SaturationThreshold of a 2 s TTFT = %v, want 0.5 (slo.ttft_s / 4)", got)
	}
}
