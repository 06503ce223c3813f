package sim

import "testing"

// BenchmarkDemoSweep is make demo's sweep on one worker: every arm at
// every rate of the moving trace, in simulated requests per wall second
// of that one core.
func BenchmarkDemoSweep(b *testing.B) {
	s := Sweep{Fleet: DemoFleet(8), Arms: AllArms(8), Rates: DemoRates(), Seed: 1,
		Segments: MovingSegments(DemoSegmentS), Target: 0.9, Workers: 1}
	reqs := 0
	for b.Loop() {
		res, err := s.Run()
		if err != nil {
			b.Fatal(err)
		}
		reqs = 0
		for _, a := range res.Arms {
			for _, r := range a.Runs {
				reqs += r.Offered
			}
		}
	}
	b.ReportMetric(float64(reqs)*float64(b.N)/b.Elapsed().Seconds(), "sim-req/s")
}
