package memory

import (
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

func oI64(v int64) *int64     { return &v }
func oF64(v float64) *float64 { return &v }
func oInt(v int) *int         { return &v }
func oBool(v bool) *bool      { return &v }
func oGiB(g float64) *int64   { return oI64(int64(g * (1 << 30))) }
func oStr(s string) *string   { return &s }
func oLogSrc(p PatternID) ObservationSource {
	return ObservationSource{Kind: SourceLogLine, Pattern: p, Resolution: 10737418.24, Note: vllmlog.NoteNone}
}

// validObservation is a consistent V1 rank-0 observation with the graph
// estimate applied.
func oValid() Observation {
	o := NewObservation()
	o.Rank = oInt(0)
	o.InitialTotalBytes, o.GPUMemoryUtilization, o.RequestedBytes = oGiB(80), oF64(0.9), oGiB(72)
	o.ModelWeightBytes, o.TransientPeakBytes, o.NonTorchIncreaseBytes = oGiB(15), oGiB(2), oGiB(0.5)
	o.CUDAGraphEstimateBytes, o.CUDAGraphEstimateApplied = oGiB(0.5), oBool(true)
	o.AvailableKVBytes = oGiB(54)
	o.Sums.NonKVCacheBytes = oGiB(17.5)
	for _, f := range []string{FieldInitialTotal, FieldRequested, FieldModelWeight, FieldNonTorchIncrease, FieldCUDAGraphEstimate, FieldAvailableKV, SumNonKVCache} {
		o.Sources[f] = oLogSrc(vllmlog.PatV1AvailableKV)
	}
	o.Sources[FieldTransientPeak] = ObservationSource{Kind: SourceDebugLog, Pattern: vllmlog.PatV1TorchPeakIncrease, Resolution: 10737418.24, Note: vllmlog.NoteIncludesPersistent}
	o.Sources[FieldUtilization] = ObservationSource{Kind: SourceLogLine, Pattern: vllmlog.PatV1RequestedUtil, Resolution: 0.0001, Note: vllmlog.NoteNone}
	o.Sources[FieldCUDAGraphApplied] = ObservationSource{Kind: SourceLogLine, Pattern: vllmlog.PatV1GraphProfilingOn, Note: vllmlog.NoteNone}
	return o
}

func TestValidObservationPasses(t *testing.T) {
	o := oValid()
	if err := o.Validate(oGiB(80)); err != nil {
		t.Fatal(err)
	}
	if err := NewObservation().Validate(nil); err != nil {
		t.Fatalf("an all-unknown observation is valid: %v", err)
	}
}

func TestObservationValidateViolations(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*Observation)
		gpu    *int64
		want   string
	}{
		{"negative weights", func(o *Observation) { o.ModelWeightBytes = oI64(-1) }, nil, FieldModelWeight},
		{"utilization above 1", func(o *Observation) { o.GPUMemoryUtilization = oF64(1.2) }, nil, FieldUtilization},
		{"zero total", func(o *Observation) { o.InitialTotalBytes = oI64(0) }, nil, FieldInitialTotal},
		{"value without source", func(o *Observation) { o.SafetyBufferBytes = oGiB(0.15) }, nil, FieldSafetyBuffer},
		{"source without value", func(o *Observation) { o.Sources[FieldPersistent] = oLogSrc(vllmlog.PatV1AvailableKV) }, nil, "sources." + FieldPersistent},
		{"unknown source field", func(o *Observation) { o.Sources["tensor_bytes"] = oLogSrc(vllmlog.PatV1AvailableKV) }, nil, "sources.tensor_bytes"},
		{"bad source kind", func(o *Observation) {
			s := o.Sources[FieldModelWeight]
			s.Kind = "guess"
			o.Sources[FieldModelWeight] = s
		}, nil, "sources." + FieldModelWeight},
		{"bad digest", func(o *Observation) { o.ExecutionFingerprint = oStr("sha256:abc") }, nil, "execution_fingerprint"},
		{"negative rank", func(o *Observation) { o.Rank = oInt(-1) }, nil, "rank"},
		{"total above the device", func(o *Observation) {}, oGiB(40), FieldInitialTotal},
		{"KV above the device", func(o *Observation) {}, oGiB(40), FieldAvailableKV},
		{"parts miss the non-KV total", func(o *Observation) { o.Sums.NonKVCacheBytes = oGiB(19) }, nil, SumNonKVCache},
		{"budget identity broken", func(o *Observation) { o.AvailableKVBytes = oGiB(50) }, nil, FieldAvailableKV},
		{"requested is not total × util", func(o *Observation) { o.GPUMemoryUtilization = oF64(0.5) }, nil, FieldRequested},
		{"estimate not applied but subtracted", func(o *Observation) { o.CUDAGraphEstimateApplied = oBool(false) }, nil, FieldAvailableKV},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := oValid()
			o.Sources = map[string]ObservationSource{}
			for k, v := range oValid().Sources {
				o.Sources[k] = v
			}
			c.mutate(&o)
			err := o.Validate(c.gpu)
			if err == nil || !IsObservationError(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a violation naming %s", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
		})
	}
}

// TestSmallerDeviceTotalAllowed: a MIG slice reports less than the card.
func TestSmallerDeviceTotalAllowed(t *testing.T) {
	o := oValid()
	if err := o.Validate(oGiB(94)); err != nil {
		t.Fatal(err)
	}
}

func TestObservationEveryFieldPresent(t *testing.T) {
	b, err := canon.Marshal(NewObservation())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{FieldInitialTotal, FieldPersistent, FieldTransientPeak, FieldCUDAGraphApplied, FieldSafetyBuffer, FieldKVCacheTokens, FieldMaxConcurrencyLen, "vllm_sums", "predicted_minus_measured", "execution_fingerprint", "rank"} {
		if !strings.Contains(string(b), `"`+strings.TrimPrefix(f, "vllm_sums.")+`":`) {
			t.Errorf("canonical form lacks %q: %s", f, b)
		}
	}
	if !strings.Contains(string(b), `"model_weight_bytes":null`) {
		t.Errorf("unknown is not null: %s", b)
	}
}

// TestObservationFingerprintIsExecutionAndRank: the figures are display
// fields; the execution and the rank are identity.
func TestObservationFingerprintIsExecutionAndRank(t *testing.T) {
	a := oValid()
	a.ExecutionFingerprint = oStr("1220" + strings.Repeat("ab", 32))
	fa, err := a.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	b := a
	b.AvailableKVBytes = oGiB(53)
	fb, _ := b.Fingerprint()
	_, da, _ := canon.MarshalDigest(a)
	_, db, _ := canon.MarshalDigest(b)
	if fa != fb || da == db {
		t.Errorf("a changed figure must keep the fingerprint (%v) and change the digest (%v)", fa == fb, da != db)
	}
	c := a
	c.Rank = oInt(1)
	if fc, _ := c.Fingerprint(); fc == fa {
		t.Error("another rank has the same fingerprint")
	}
	d := a
	d.Rank = nil
	if fd, _ := d.Fingerprint(); fd == fa {
		t.Error("an unknown rank has rank 0's fingerprint")
	}
}
