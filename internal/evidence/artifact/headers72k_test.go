package artifact_test

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
)

// fp8MoE72k is a header-only block-FP8 MoE checkpoint of 72,000-odd
// tensors (Qwen3-30B-A3B's shape widened to 248 experts, the size class
// of DeepSeek-V3-style FP8 releases), split over 16 shards.
func fp8MoE72k(tb testing.TB) (string, int) {
	tb.Helper()
	m := fixture.Qwen3_30B_A3B()
	m.Experts = 248
	spec := fixture.Must(fixture.FP8Block(fixture.Build(m, 16), 128, 128, "F32"))
	dir := tb.TempDir()
	if _, err := fixture.Write(dir, spec); err != nil {
		tb.Fatal(err)
	}
	return dir, len(spec.Tensors)
}

// BenchmarkHeaders72k is issue 27's bound: plan's header reader over a
// 72k-tensor FP8 checkpoint must take at most 300 ms.
func BenchmarkHeaders72k(b *testing.B) {
	dir, n := fp8MoE72k(b)
	if n < 72000 {
		b.Fatalf("fixture has %d tensors, want ≥ 72000", n)
	}
	for b.Loop() {
		h, err := artifact.ReadHeaders(dir)
		if err != nil {
			b.Fatal(err)
		}
		if len(h.Tensors) != n {
			b.Fatalf("read %d tensors, want %d", len(h.Tensors), n)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(n), "tensors")
}
