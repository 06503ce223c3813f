package memory

import (
	"bytes"
	"math"
	"testing"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

func cmpKnown(b, lo, hi int64) Component {
	return Component{Bytes: b, Lower: lo, Upper: hi, Status: StatusPredicted, Source: []string{}}
}

func cmpDerived(b int64) Component {
	return Component{Bytes: b, Lower: b, Upper: b, Status: StatusDerived, Source: []string{}}
}

// cmpPrediction is a hand-made prediction for the v1_estimate.log engine
// (Llama-3.1-8B BF16, one H100, utilization 0.9, 32k context).
func cmpPrediction(t *testing.T) Prediction {
	g := func(s string) int64 { return vlGiB(t, s) }
	return Prediction{
		Status:                 PredictionKnown,
		Launch:                 LaunchConfig{TP: 1, PP: 1, MaxModelLen: 32768, GPUMemoryUtilization: 0.9, BlockSize: 16},
		RequestedBytes:         g("71.26"),
		WeightBytesPerRank:     cmpDerived(16060522496), // 8,030,261,248 parameters × 2 bytes
		ActivationPeak:         cmpKnown(g("1.80"), g("1.50"), g("2.30")),
		NonTorch:               cmpKnown(g("0.20"), g("0.10"), g("0.40")),
		CUDAGraphEstimate:      cmpKnown(g("0.55"), g("0.40"), g("0.70")),
		CUDAGraphApplied:       true,
		AvailableKVBytes:       cmpKnown(g("53.75"), g("53.20"), g("54.10")),
		KVBytesPerToken:        131072,
		BlockSize:              16,
		NumBlocks:              27520,
		KVCapacityTokens:       440320,
		MaxConcurrencyAtMaxLen: 13.44,
	}
}

func cmpByFigure(rows []FigureError) map[Figure]FigureError {
	m := map[Figure]FigureError{}
	for _, r := range rows {
		m[r.Figure] = r
	}
	return m
}

func TestCompareFigureByFigure(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v1_estimate.log"))
	rows := Compare(cmpPrediction(t), o)
	order := []Figure{FigRequested, FigWeights, FigActivationPeak, FigNonTorch, FigCUDAGraphEstimate, FigCUDAGraphActual, FigAvailableKV, FigKVTokens, FigGPUBlocks, FigMaxConcurrency}
	if len(rows) != len(order) {
		t.Fatalf("%d rows, want %d", len(rows), len(order))
	}
	for i, f := range order {
		if rows[i].Figure != f {
			t.Errorf("row %d is %s, want %s", i, rows[i].Figure, f)
		}
	}
	by := cmpByFigure(rows)
	w := by[FigWeights]
	logged := float64(vlGiB(t, "14.99"))
	if !w.Compared || *w.Logged != logged || *w.AbsError != 16060522496-logged {
		t.Fatalf("weights row %+v", w)
	}
	if rel := *w.RelError; math.Abs(rel-(16060522496-logged)/logged) > 1e-12 || math.Abs(rel) > 0.03 {
		t.Errorf("weights relative error %v", rel)
	}
	if *w.WithinBand {
		t.Errorf("derived weights 14.958 GiB vs logged 14.99 ± 0.01: outside the zero-width band")
	}
	kv := by[FigAvailableKV]
	if !kv.Compared || !*kv.WithinBand || math.Abs(*kv.RelError) > 0.10 {
		t.Errorf("available KV row %+v", kv)
	}
	a := by[FigActivationPeak]
	if !a.Compared || *a.Logged != float64(vlGiB(t, "2.01")) || a.LoggedNote != vllmlog.NoteIncludesPersistent {
		t.Errorf("activation row %+v: compared against the torch peak increase", a)
	}
	if r := by[FigKVTokens]; !r.Compared || *r.AbsError != 440320-438096 {
		t.Errorf("kv tokens row %+v", r)
	}
	if r := by[FigGPUBlocks]; r.Compared || r.Reason != ReasonLoggedUnknown {
		t.Errorf("blocks row %+v: V1 INFO logs carry no block count", r)
	}
	if r := by[FigMaxConcurrency]; !r.Compared || math.Abs(*r.AbsError-0.07) > 1e-9 {
		t.Errorf("concurrency row %+v", r)
	}
	if r := by[FigCUDAGraphActual]; !r.Compared || *r.Logged != float64(vlGiB(t, "0.58")) {
		t.Errorf("graph actual row %+v", r)
	}
}

func TestCompareUnknownSides(t *testing.T) {
	p := cmpPrediction(t)
	p.NonTorch = Component{Status: StatusUnknown, Reason: "no calibration for this mechanism", Source: []string{}}
	p.AvailableKVBytes = Component{Status: StatusUnknown, Reason: "non-torch unknown", Source: []string{}}
	o := vlOnly(t, vlFile(t, "v1_kv_cache_memory.log")) // no profile figures
	by := cmpByFigure(Compare(p, o))
	for f, want := range map[Figure]CompareReason{
		FigNonTorch:          ReasonBothUnknown,
		FigActivationPeak:    ReasonLoggedUnknown,
		FigCUDAGraphEstimate: ReasonLoggedUnknown,
		FigAvailableKV:       ReasonPredictedUnknown,
		FigKVTokens:          ReasonPredictedUnknown, // follows the KV budget
		FigRequested:         ReasonLoggedUnknown,
	} {
		r := by[f]
		if r.Compared || r.Reason != want || r.AbsError != nil || r.RelError != nil {
			t.Errorf("%s: %+v, want uncompared with %s", f, r, want)
		}
	}
	if r := by[FigNonTorch]; r.PredictedReason != "no calibration for this mechanism" || r.PredictedStatus != string(StatusUnknown) {
		t.Errorf("the calculator's reason is not carried: %+v", r)
	}
}

func TestCompareConcurrencyOnlyAtSameContext(t *testing.T) {
	p := cmpPrediction(t)
	p.Launch.MaxModelLen = 131072
	o := vlOnly(t, vlFile(t, "v1_estimate.log")) // logged for 32,768 tokens
	r := cmpByFigure(Compare(p, o))[FigMaxConcurrency]
	if r.Compared || r.Reason != ReasonContextDiffers || r.AbsError != nil {
		t.Fatalf("%+v: concurrency at another context is not comparable", r)
	}
}

func TestCompareLoggedZero(t *testing.T) {
	o := NewObservation()
	o.CUDAGraphActualBytes = oI64(0)
	o.Sources[FieldCUDAGraphActual] = oLogSrc(vllmlog.PatGraphCaptured)
	r := cmpByFigure(Compare(cmpPrediction(t), o))[FigCUDAGraphActual]
	if !r.Compared || r.RelError != nil || r.Reason != ReasonLoggedZero || r.AbsError == nil {
		t.Fatalf("%+v", r)
	}
}

func TestComparePipelineStage(t *testing.T) {
	p := cmpPrediction(t)
	p.Ranks = []RankPrediction{
		{PPRank: 0, WeightBytes: cmpDerived(vlGiB(t, "16.80")), AvailableKVBytes: cmpKnown(vlGiB(t, "50.9"), vlGiB(t, "50"), vlGiB(t, "52")), NumBlocks: 1},
		{PPRank: 1, WeightBytes: cmpDerived(vlGiB(t, "16.05")), AvailableKVBytes: cmpKnown(vlGiB(t, "50.8"), vlGiB(t, "50"), vlGiB(t, "52")), NumBlocks: 2},
	}
	l := vlFile(t, "v1_pp2_tp2.log")
	last := l.Observations[3] // PP 1
	by := cmpByFigure(Compare(p, last))
	if got := *by[FigWeights].Predicted; got != float64(vlGiB(t, "16.05")) {
		t.Errorf("stage 1 weights predicted %v, want stage 1's", got)
	}
	if got := *by[FigAvailableKV].Predicted; got != float64(vlGiB(t, "50.8")) {
		t.Errorf("stage 1 KV predicted %v, want stage 1's", got)
	}
}

func TestApplyComparison(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v1_estimate.log"))
	rows := Compare(cmpPrediction(t), o)
	o2 := ApplyComparison(o, rows)
	want := int64(16060522496) - vlGiB(t, "14.99")
	if got, ok := o2.PredictedMinusMeasured[FieldModelWeight]; !ok || got != want {
		t.Errorf("weights delta %d (%v), want %d", got, ok, want)
	}
	if _, ok := o2.PredictedMinusMeasured[FieldKVCacheTokens]; ok {
		t.Error("a token count is not a byte delta")
	}
	if len(o.PredictedMinusMeasured) != 0 {
		t.Error("ApplyComparison changed its input")
	}
	if _, _, err := o2.Encode(); err != nil {
		t.Fatal(err)
	}
}

func TestCompareDeterministic(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v1_estimate.log"))
	a, err := canon.Marshal(Compare(cmpPrediction(t), o))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := canon.Marshal(Compare(cmpPrediction(t), o))
	if !bytes.Equal(a, b) {
		t.Fatal("comparison bytes differ between runs")
	}
}
