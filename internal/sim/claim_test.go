//go:build !race

package sim

import "testing"

// The claim, on the demo's own configuration: on the moving trace
// the adaptive arm sustains at least the rate of the best static split at
// 90% attainment. It runs the whole demo sweep (seconds without the race
// detector, far too long with it, hence the build tag; -short skips it).
func TestDemoAdaptiveSustainsTheBestStaticRate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the full demo sweep")
	}
	s := Sweep{Fleet: DemoFleet(8), Arms: AllArms(8), Rates: DemoRates(), Seed: 1,
		Segments: MovingSegments(DemoSegmentS), Target: 0.9, Workers: 2}
	res, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Comparison.Holds {
		t.Errorf("%s", res.Comparison.Line())
	}
}
