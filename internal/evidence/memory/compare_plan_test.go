package memory

import (
	"math"
	"strconv"
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
)

// TestCompareLogWithinTolerance plans the engines the test logs describe
// (testdata/vllmlog, written in vLLM's formats; model, GPU, TP, context and
// utilization as the log states them) and compares each rank figure by
// figure. It reports every error and holds the bounds: weights
// within ±3 %, the KV budget within ±10 % wherever the calculator predicts
// one. Uses the calculator's test helper planOf (helpers_calc_test.go).
func TestCompareLogWithinTolerance(t *testing.T) {
	kvCompared := 0
	for _, c := range []struct {
		log  string
		spec fixture.Spec
		gpu  string
		l    LaunchConfig
	}{
		{"v1_estimate.log", fixture.Build(fixture.Llama31_8B(), 1), "h100", LaunchConfig{TP: 1, MaxModelLen: 32768, GPUMemoryUtilization: 0.9}},
		{"v1_tp2_debug.log", fixture.Build(fixture.Llama31_8B(), 1), "h100", LaunchConfig{TP: 2, MaxModelLen: 131072, GPUMemoryUtilization: 0.9}},
		{"v1_tp4_workers.log", fixture.Build(fixture.Llama31_70B(), 1), "h100", LaunchConfig{TP: 4, MaxModelLen: 131072, GPUMemoryUtilization: 0.9}},
		{"v0_6_6_single.log", fixture.Build(fixture.Llama31_8B(), 1), "a100-80gb", LaunchConfig{TP: 1, MaxModelLen: 131072, GPUMemoryUtilization: 0.9}},
	} {
		p := planOf(t, c.spec, c.gpu, c.l)
		for _, o := range vlFile(t, c.log).Observations {
			by := cmpByFigure(Compare(p, o))
			for _, f := range []Figure{FigWeights, FigActivationPeak, FigNonTorch, FigCUDAGraphEstimate, FigAvailableKV, FigKVTokens, FigMaxConcurrency} {
				r := by[f]
				if r.Compared {
					t.Logf("%s rank %s %-18s predicted %.4g logged %.4g error %+.4g (%+.2f%%)", c.log, rankOf(o), f, *r.Predicted, *r.Logged, *r.AbsError, 100*relOr0(r))
				} else {
					t.Logf("%s rank %s %-18s not compared: %s %s", c.log, rankOf(o), f, r.Reason, r.PredictedReason)
				}
			}
			w := by[FigWeights]
			if !w.Compared || math.Abs(*w.RelError) > 0.03 {
				t.Errorf("%s: weights %+v outside ±3%%", c.log, w)
			}
			if kv := by[FigAvailableKV]; kv.Compared {
				kvCompared++
				if math.Abs(*kv.RelError) > 0.10 {
					t.Errorf("%s: KV budget error %+.2f%% outside ±10%%", c.log, 100**kv.RelError)
				}
			}
		}
	}
	if kvCompared < 3 {
		t.Errorf("the KV budget was compared for %d ranks; the calculator predicts too few", kvCompared)
	}
}

func rankOf(o Observation) string {
	if o.Rank == nil {
		return "?"
	}
	return strconv.Itoa(*o.Rank)
}

func relOr0(r FigureError) float64 {
	if r.RelError == nil {
		return 0
	}
	return *r.RelError
}
