package sim

import "testing"

// BenchmarkRun measures simulated requests per wall second: the adaptive
// arm on eight engines over the demo's moving trace at 10 req/s.
func BenchmarkRun(b *testing.B) {
	tr, err := Generate(MovingSegments(60), 10, 1)
	if err != nil {
		b.Fatal(err)
	}
	f := DemoFleet(8)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Run(f, Adaptive(8), tr); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tr.Arrivals))*float64(b.N)/b.Elapsed().Seconds(), "sim-req/s")
}
