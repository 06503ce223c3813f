package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

func TestBuckets(t *testing.T) {
	cases := []struct {
		scale float64
		want  []float64
	}{
		{2, []float64{0.05, 0.1, 0.2, 0.4, 0.7, 1, 1.4, 2, 3, 6, 20}},
		{0.05, []float64{0.00125, 0.0025, 0.005, 0.01, 0.0175, 0.025, 0.035, 0.05, 0.075, 0.15, 0.5}},
		{1, BucketFractions()},
		// rounding to 6 places hides binary noise: 0.3 × 0.35 is 0.105 exactly
		{0.3, []float64{0.0075, 0.015, 0.03, 0.06, 0.105, 0.15, 0.21, 0.3, 0.45, 0.9, 3}},
		{1e-7, []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.000001}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, Buckets(c.scale)); diff != "" {
			t.Errorf("Buckets(%g) (-want +got):\n%s", c.scale, diff)
		}
	}
}

func TestScalesOf(t *testing.T) {
	cases := []struct {
		name     string
		queueS   float64
		wantWait float64
	}{
		{"queue timeout set", 5, 5},
		{"no queue falls back to ttft", 0, 2},
	}
	for _, c := range cases {
		cfg := fleet.Defaults()
		cfg.SLO = fleet.SLO{TTFT: 2, TPOT: 0.05}
		cfg.Serving.QueueTimeoutS = c.queueS
		want := Scales{TTFT: 2, TPOT: 0.05, QueueWait: c.wantWait, Seat: 2, E2E: 2 + 256*0.05} // E2ETokens at slo.tpot_s
		if got := ScalesOf(&cfg); got != want {
			t.Errorf("%s: ScalesOf = %+v, want %+v", c.name, got, want)
		}
	}
}

func TestSLOLabel(t *testing.T) {
	for scale, want := range map[float64]string{2: "2", 0.05: "0.05", 1.5: "1.5", 120: "120"} {
		if got := SLOLabel(scale); got != want {
			t.Errorf("SLOLabel(%g) = %q, want %q", scale, got, want)
		}
	}
}
