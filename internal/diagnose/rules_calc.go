package diagnose

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/units"
)

// calculator runs the memory calculator on variants of the base plan. It
// is present only when the operator gave a model directory.
type calculator struct {
	in   memory.PlanInput
	arch memory.ArchFacts
	base memory.Prediction // the base plan's prediction (zero when it failed)
	ok   bool              // base is a known prediction
}

func newCalculator(in memory.PlanInput, hw memory.HardwareSpec, ef memory.EngineFacts, base plan.Plan) *calculator {
	if hw.TotalMemoryBytes > 0 {
		in.Hardware = hw
	}
	if in.Facts.Version == "" {
		in.Facts = ef
	}
	k := &calculator{in: in}
	k.arch, _ = memory.ParseArch(in.Config)
	if p, err := k.predict(base); err == nil {
		k.base, k.ok = p, p.Status == memory.PredictionKnown
	}
	return k
}

// predict is the calculator's prediction for p, the operator's model
// launch with p's set fields laid over it.
func (k *calculator) predict(p plan.Plan) (memory.Prediction, error) {
	in := k.in
	in.Launch = overlay(in.Launch, p.Launch())
	return memory.Plan(in)
}

// known is predict limited to known predictions.
func (k *calculator) known(p plan.Plan) (memory.Prediction, bool) {
	pr, err := k.predict(p)
	return pr, err == nil && pr.Status == memory.PredictionKnown
}

// overlay lays the set (non-zero) fields of o over l.
func overlay(l, o memory.LaunchConfig) memory.LaunchConfig {
	setI := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	setI64 := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	setS := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	setI(&l.TP, o.TP)
	setI(&l.PP, o.PP)
	setI(&l.DP, o.DP)
	if o.EnableExpertParallel {
		l.EnableExpertParallel = true
	}
	setI64(&l.MaxModelLen, o.MaxModelLen)
	setI64(&l.MaxNumSeqs, o.MaxNumSeqs)
	setI64(&l.MaxNumBatchedTokens, o.MaxNumBatchedTokens)
	if o.GPUMemoryUtilization != 0 {
		l.GPUMemoryUtilization = o.GPUMemoryUtilization
	}
	setS(&l.KVCacheDType, o.KVCacheDType)
	setS(&l.DType, o.DType)
	setS(&l.Quantization, o.Quantization)
	if o.EnforceEager {
		l.EnforceEager = true
	}
	if o.CUDAGraphCaptureSizes != nil {
		l.CUDAGraphCaptureSizes = o.CUDAGraphCaptureSizes
	}
	return l
}

// kvBytesPerToken is the worst rank's KV bytes per token (every layer
// counted as full attention, so a window model's figure is an upper
// bound) and the block size, from the base prediction.
func (k *calculator) kvBytesPerToken() (int64, int64, bool) {
	if k == nil || k.base.KVBytesPerToken <= 0 {
		return 0, 0, false
	}
	per := k.base.KVBytesPerToken
	for _, r := range k.base.Ranks {
		per = max(per, r.KVBytesPerToken)
	}
	return per, max(1, k.base.BlockSize), true
}

// tpDivides reports whether vLLM accepts tensor-parallel size t for h
// attention heads and kv KV heads (kv = 0: not known, not checked): the
// heads split evenly, and KV heads split evenly or replicate evenly.
func tpDivides(h, kv, t int64) bool {
	if t < 1 || h%t != 0 {
		return false
	}
	if kv <= 0 {
		return true
	}
	if kv >= t {
		return kv%t == 0
	}
	return t%kv == 0
}

func (k *calculator) describe(p memory.Prediction) string {
	return fmt.Sprintf("calculator (vLLM %s facts, %s): weights %s per rank, KV budget %s, %d KV tokens", p.EngineVersion,
		p.Hardware.Name, units.GiB(p.WeightBytesPerRank.Bytes), units.GiB(p.AvailableKVBytes.Bytes), p.KVCapacityTokens)
}
