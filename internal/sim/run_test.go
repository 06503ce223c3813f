package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

func TestLinkTransfer(t *testing.T) {
	l := Link{BytesPerToken: 1000, BytesPerSecond: 1e6, LatencyS: 0.002}
	cases := []struct {
		tokens int
		want   float64
	}{{0, 0.002}, {1, 0.003}, {1000, 1.002}}
	for _, c := range cases {
		if got := l.TransferS(c.tokens); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("TransferS(%d) = %v, want %v", c.tokens, got, c.want)
		}
	}
}

func one(in, out int) Trace {
	return Trace{Arrivals: []Arrival{{At: 1, InputLen: in, OutputLen: out}}, DurationS: 2}
}

// One request alone: TTFT is exactly the profiled prefill; the crossed
// decode leg pays the KV transfer that aggregated serving does not.
func TestSingleRequestTiming(t *testing.T) {
	f := DemoFleet(2)
	tr := one(1000, 50)
	split := mustRun(t, f, Static(1, 2), tr)
	agg := mustRun(t, f, Aggregated(2), tr)
	want := math.Round(DemoProfile("e00").PrefillTime(1000)*1e6) / 1e6
	for _, r := range []*Result{split, agg} {
		if r.Met != 1 || r.TTFTP50 != want {
			t.Errorf("%s: met %d, TTFT %v, want 1 and %v", r.Arm, r.Met, r.TTFTP50, want)
		}
	}
	floor := DemoProfile("e00").TokenInterval(1000, 1)
	if agg.TPOTP50 < floor || split.TPOTP50 <= agg.TPOTP50 {
		t.Errorf("TPOT split %v, aggregated %v: want aggregated ≥ the decode floor %v and split above it (KV transfer)",
			split.TPOTP50, agg.TPOTP50, floor)
	}
}

// Every offered request ends in exactly one outcome, whatever the arm.
func TestEveryRequestEndsOnce(t *testing.T) {
	f := DemoFleet(4)
	tr := mustGenerate(t, MovingSegments(40), 14, 2) // overloaded: refusals and misses
	for _, a := range AllArms(4) {
		r := mustRun(t, f, a, tr)
		sum := r.Met + r.Late + r.Refused + r.Failed + r.Unfinished
		if sum != r.Offered || r.Offered != len(tr.Arrivals) {
			t.Errorf("%s: met %d + late %d + refused %d + failed %d + unfinished %d = %d, offered %d of %d",
				a.Name, r.Met, r.Late, r.Refused, r.Failed, r.Unfinished, sum, r.Offered, len(tr.Arrivals))
		}
		if r.Attainment > 0.9 {
			t.Errorf("%s: attainment %.3f at 14 req/s on four engines, want it overloaded", a.Name, r.Attainment)
		}
	}
}

// At 1 req/s on four engines every arm meets the SLO for nearly every
// request (Poisson bursts in the prefill-heavy phase may queue a few: on
// 1P3D 5 of 120 wait past their deadline and one served from the queue
// misses its TTFT, 0.947; with the queue off 6 are refused, 0.955).
func TestLightLoadMeetsTheSLO(t *testing.T) {
	tr := mustGenerate(t, MovingSegments(40), 1, 3)
	for _, a := range AllArms(4) {
		if r := mustRun(t, DemoFleet(4), a, tr); r.Attainment < 0.94 {
			t.Errorf("%s: attainment %.3f, refused %v, ttft misses %d, tpot misses %d at 1 req/s", a.Name, r.Attainment, r.RefusedBy, r.TTFTMiss, r.TPOTMiss)
		}
	}
}

// A prompt that alone cannot meet the TTFT target is refused by
// predictive admission; with open admission a request that can never fit
// an engine's KV fails instead of hanging.
func TestRefusedAndFailed(t *testing.T) {
	r := mustRun(t, DemoFleet(2), Static(1, 2), one(8000, 4))
	if r.Refused != 1 {
		t.Errorf("8000-token prompt (about %.1f s of prefill, TTFT 2 s): refused %d, want 1", DemoProfile("e00").PrefillTime(8000), r.Refused)
	}
	open := DemoFleet(2)
	open.Configure = func(c *fleet.Config) { c.Serving.Admission = fleet.AdmissionOpen }
	r = mustRun(t, open, Static(1, 2), one(70000, 4))
	if r.Failed != 1 || r.Unfinished != 0 {
		t.Errorf("70000-token prompt on 65536-token engines: failed %d unfinished %d, want 1 and 0", r.Failed, r.Unfinished)
	}
}

// Work still open when the drain bound passes counts as unfinished.
func TestDrainBound(t *testing.T) {
	f := DemoFleet(2)
	f.DrainS = 0.5
	r := mustRun(t, f, Static(1, 2), one(1000, 2000))
	if r.Unfinished != 1 || r.SimulatedS > 2.5+1e-9 {
		t.Errorf("unfinished %d after %v s, want 1 by 2.5 s", r.Unfinished, r.SimulatedS)
	}
}

func TestRunRejects(t *testing.T) {
	noProfile := DemoFleet(2)
	noProfile.Profile = nil
	cases := []struct {
		name string
		f    Fleet
		a    Arm
		want string
	}{
		{"policy", DemoFleet(2), Arm{Name: "x", Policy: "planner", Prefill: 1}, `unknown policy "planner"`},
		{"split", DemoFleet(2), Static(3, 2), "starts with 3 prefill engines of 2"},
		{"profile", noProfile, Static(1, 2), "fleet has no Profile"},
		{"fleet", small(2, func(c *fleet.Config) { c.SLO.TTFT = -1 }), Static(1, 2), "slo.ttft_s"},
	}
	for _, c := range cases {
		_, err := Run(c.f, c.a, one(10, 2))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, err, c.want)
		}
	}
}
