package diagnose

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
)

// Rules of the weight, dtype, parallelism, quantization and transfer
// families.

var ampere = ComputeCapability{Major: 8, Minor: 0}

// ruleWeightsOOM: CUDA out of memory while loading weights. A larger TP
// is computed with the calculator; fp8 online quantization and a
// quantized checkpoint are the alternatives.
func ruleWeightsOOM(c *ruleCtx) {
	c.largerTP()
	c.onlineFP8()
	p := c.base.Clone()
	c.propose(p, []string{"a checkpoint quantized to fewer bits (AWQ, GPTQ, FP8) holds fewer weight bytes per rank; plan it with narwhal plan on its own headers"},
		[]TradeOff{{TradeArtifact, "a different checkpoint: its identity, quality and licence are its own and must be evaluated"},
			{TradeNumerics, "quantized weights: accuracy depends on the method"}},
		[]Need{{NeedModelDir, "quantized_artifact_headers", "the quantized checkpoint's memory is predicted from its own tensor headers, never by dividing this one's bytes"}}, true)
}

// largerTP proposes the smallest tensor-parallel size above the plan's
// that vLLM accepts for the model's heads and that the calculator
// predicts to fit.
func (c *ruleCtx) largerTP() {
	if c.calc == nil {
		c.need(NeedModelDir, "weight_bytes_per_rank", "the tensor-parallel size that fits the weights is computed by the calculator (give the model directory)")
		return
	}
	t0 := int64(max(1, c.base.TensorParallelSize))
	a := c.calc.arch
	for t := t0 + 1; t <= min(plan.MaxParallel, 8*t0); t++ {
		if !tpDivides(a.NumHeads, a.NumKVHeads, t) {
			continue
		}
		p := c.base.Clone()
		p.TensorParallelSize = int(t)
		pr, ok := c.calc.known(p)
		if !ok || !pr.Fits {
			continue
		}
		c.propose(p, []string{fmt.Sprintf("tensor_parallel_size = %d: the smallest size above %d that divides %d attention and %d KV heads and fits (%s)", t, t0, a.NumHeads, a.NumKVHeads, c.calc.describe(pr))},
			[]TradeOff{{TradeMoreGPUs, fmt.Sprintf("%d GPUs per engine instead of %d", t*int64(max(1, c.base.PipelineParallelSize)), t0*int64(max(1, c.base.PipelineParallelSize)))}}, nil, false)
		return
	}
	c.note(fmt.Sprintf("no tensor-parallel size up to %d fits by the calculator", min(plan.MaxParallel, 8*t0)))
}

// onlineFP8 proposes vLLM's load-time fp8 quantization of an unquantized
// checkpoint (FP8 Marlin on compute capability 8.0+, native on 8.9+).
func (c *ruleCtx) onlineFP8() {
	if c.base.Quantization != plan.QuantUnset {
		return
	}
	if c.calc != nil && c.calc.arch.Quant.Method != "" {
		return // already a quantized checkpoint
	}
	if c.cc == nil {
		c.need(NeedGPU, "compute_capability", "load-time fp8 quantization needs compute capability 8.0 or newer; the GPU is not known (give --gpu)")
		return
	}
	if c.cc.Less(ampere) {
		return
	}
	p := c.base.Clone()
	p.Quantization = plan.QuantFP8
	c.propose(p, []string{fmt.Sprintf("quantization fp8: vLLM quantizes the weights to 8 bits while loading; compute capability %s ≥ 8.0", c.cc)},
		[]TradeOff{{TradeNumerics, "weights quantized to fp8 at load time: accuracy may change"},
			{TradeUnpredicted, "the calculator does not model an online transform: the fit is decided by the proof"}},
		[]Need{{NeedModelDir, "fp8_weight_bytes", "the memory of online fp8 weights is not predicted"}}, false)
}

// ruleBF16Unsupported: bfloat16 on a GPU below compute capability 8.0.
func ruleBF16Unsupported(c *ruleCtx) {
	if c.cc == nil {
		c.need(NeedGPU, "compute_capability", "float16 replaces bfloat16 only below compute capability 8.0; the log states no capability and no --gpu names the card")
		return
	}
	if !c.cc.Less(ampere) {
		c.note(fmt.Sprintf("compute capability %s supports bfloat16: the failure does not match this GPU (check --gpu)", c.cc))
		return
	}
	p := c.base.Clone()
	p.DType = plan.DTypeHalf
	c.propose(p, []string{fmt.Sprintf("dtype half: compute capability %s < 8.0 has no bfloat16; float16 is its 2-byte type, so the memory plan is unchanged", c.cc)},
		[]TradeOff{{TradeNumerics, "float16 has a narrower range than bfloat16: a model trained in bfloat16 can overflow (inf/NaN) in float16"}}, nil, false)
	c.float32Alternative()
}

// float32Alternative proposes --dtype float32 when the calculator predicts
// that twice the weight bytes still fit.
func (c *ruleCtx) float32Alternative() {
	if c.calc == nil {
		c.need(NeedModelDir, "float32_fit", "whether float32 weights (twice the bytes) fit is predicted by the calculator (give the model directory)")
		return
	}
	p := c.base.Clone()
	p.DType = plan.DTypeFloat32
	if pr, ok := c.calc.known(p); ok && pr.Fits {
		c.propose(p, []string{"dtype float32: " + c.calc.describe(pr)},
			[]TradeOff{{TradeKVCapacity, "float32 doubles weight and KV bytes"}, {TradeLatency, "float32 matmuls are much slower than half precision"}}, nil, false)
	}
}

// ruleDTypeIncompatible: the model does not support float16.
func ruleDTypeIncompatible(c *ruleCtx) {
	if c.cc == nil {
		c.need(NeedGPU, "compute_capability", "bfloat16 replaces float16 on compute capability 8.0 or newer; the GPU is not known (give --gpu)")
		return
	}
	if c.cc.Less(ampere) {
		c.float32Alternative()
		return
	}
	p := c.base.Clone()
	p.DType = plan.DTypeBFloat16
	c.propose(p, []string{fmt.Sprintf("dtype bfloat16: the model refuses float16 and compute capability %s ≥ 8.0 has bfloat16 (same bytes)", c.cc)},
		[]TradeOff{{TradeNumerics, "bfloat16 has less mantissa precision than float16"}}, nil, false)
}

// ruleTPDivisibility: the tensor-parallel size does not divide the heads.
// The nearest sizes below and above that divide both attention and KV
// heads are computed (and checked to fit by the calculator when present).
func ruleTPDivisibility(c *ruleCtx) {
	h, kv := c.heads()
	t0 := int64(c.base.TensorParallelSize)
	if h <= 0 || t0 <= 0 {
		c.need(NeedFact, "num_attention_heads", "the nearest dividing TP needs the attention head count and the TP size (from the log, the plan or the model directory)")
		return
	}
	var unchecked []Need
	if kv <= 0 {
		unchecked = append(unchecked, Need{NeedModelDir, "num_kv_heads", "KV-head divisibility is not checked: the KV head count is not known"})
	}
	if below := nearestTP(h, kv, t0, -1); below > 0 {
		c.tpCandidate(below, t0, h, kv, unchecked, TradeOff{TradeThroughput, fmt.Sprintf("%d GPUs instead of %d: each holds %d/%d of the model", below, t0, t0, below)})
	}
	if above := nearestTP(h, kv, t0, +1); above > 0 {
		c.tpCandidate(above, t0, h, kv, unchecked, TradeOff{TradeMoreGPUs, fmt.Sprintf("%d GPUs per engine instead of %d", above, t0)})
	}
}

func (c *ruleCtx) heads() (int64, int64) {
	var h, kv int64
	if c.f.NumAttentionHeads != nil {
		h = *c.f.NumAttentionHeads
	}
	if c.f.NumKVHeads != nil {
		kv = *c.f.NumKVHeads
	}
	if c.calc != nil {
		if h == 0 {
			h = c.calc.arch.NumHeads
		}
		if kv == 0 {
			kv = c.calc.arch.NumKVHeads
		}
	}
	return h, kv
}

// nearestTP is the nearest size to t0 in direction dir that vLLM accepts
// (0 when none, or above 8×t0).
func nearestTP(h, kv, t0 int64, dir int64) int64 {
	for t := t0 + dir; t >= 1 && t <= min(plan.MaxParallel, 8*t0); t += dir {
		if tpDivides(h, kv, t) {
			return t
		}
	}
	return 0
}

func (c *ruleCtx) tpCandidate(t, t0, h, kv int64, unchecked []Need, trade TradeOff) {
	p := c.base.Clone()
	p.TensorParallelSize = int(t)
	kvText := fmt.Sprintf("%d KV heads", kv)
	if kv <= 0 {
		kvText = "KV heads not known"
	}
	basis := []string{fmt.Sprintf("tensor_parallel_size = %d: the nearest size to %d dividing %d attention heads (%s)", t, t0, h, kvText)}
	if c.calc == nil {
		unchecked = append(unchecked, Need{NeedModelDir, "fit", fmt.Sprintf("whether TP %d fits the GPU is predicted by the calculator (give the model directory)", t)})
	} else if pr, ok := c.calc.known(p); !ok || !pr.Fits {
		c.note(fmt.Sprintf("tensor_parallel_size %d divides the heads but the calculator does not predict a fit", t))
		return
	} else {
		basis = append(basis, c.calc.describe(pr))
	}
	c.propose(p, basis, []TradeOff{trade}, unchecked, false)
}

// quantKernels are kernels that read the same checkpoint format with a
// lower minimum compute capability (vLLM's get_min_capability).
var quantKernels = map[plan.Quantization]struct {
	alt   plan.Quantization
	minCC ComputeCapability
}{
	plan.QuantAWQMarlin:  {plan.QuantAWQ, ComputeCapability{7, 5}},
	plan.QuantGPTQMarlin: {plan.QuantGPTQ, ComputeCapability{6, 0}},
	plan.QuantMarlin:     {plan.QuantGPTQ, ComputeCapability{6, 0}},
}

// ruleQuantCapability: the quantization method needs a newer GPU.
func ruleQuantCapability(c *ruleCtx) {
	q := c.base.Quantization
	if q == plan.QuantUnset || c.cc == nil {
		c.need(NeedFact, "quantization", "a kernel for the same checkpoint needs the method and the GPU's compute capability (from the log or --gpu)")
		return
	}
	k, ok := quantKernels[q]
	if !ok || c.cc.Less(k.minCC) {
		req := "a newer one"
		if r := c.f.RequiredComputeCapability; r != nil {
			req = r.String()
		}
		c.action(ActionDifferentArtifact, fmt.Sprintf("%s needs compute capability %s, the GPU has %s: serve it on a newer GPU, or use a checkpoint quantized with a method this GPU runs", q, req, c.cc))
		return
	}
	p := c.base.Clone()
	p.Quantization = k.alt
	c.propose(p, []string{fmt.Sprintf("quantization %s: the same checkpoint format through a kernel that needs compute capability %s ≤ %s", k.alt, k.minCC, c.cc)},
		[]TradeOff{{TradeLatency, fmt.Sprintf("the %s kernel is slower than %s", k.alt, q)}}, nil, false)
}

// ruleNIXLHandshake: the compatibility hash or connector version differs
// between engines. Aligning them is computed from the fleet's contract.
func ruleNIXLHandshake(c *ruleCtx) {
	k := c.in.Requirements.Contract
	if k == nil {
		c.need(NeedFleet, "engine_contract", "the versions and factors to align come from the fleet's engine contract (give --fleet)")
		return
	}
	p := c.base.Clone()
	var basis []string
	if k.ModelDType != plan.DTypeUnset && p.DType != plan.DTypeUnset && !sameDType(p.DType, k.ModelDType) {
		p.DType = k.ModelDType
		basis = append(basis, fmt.Sprintf("dtype %s: the contract's model_dtype", k.ModelDType))
	}
	if k.KVCacheDType != plan.KVCacheUnset && p.KVCacheDType != plan.KVCacheUnset && !sameKV(p.KVCacheDType, k.KVCacheDType) {
		p.KVCacheDType = k.KVCacheDType
		basis = append(basis, fmt.Sprintf("kv_cache_dtype %s: the contract's kv_cache_dtype", k.KVCacheDType))
	}
	if len(basis) > 0 {
		c.propose(p, basis, []TradeOff{{TradeFleetWide, "brings this engine back to the contract every engine shares"}}, nil, false)
	}
	c.action(ActionAlignVersions, fmt.Sprintf("run every engine from the contract's build (vllm_version %s, nixl_connector_version %d%s) and keep enforce_handshake_compat on; narwhal-check's contract gate names the differing factor", k.VLLMVersion, k.NIXLConnectorVersion, imageNote(k.ImageDigest)))
}

func imageNote(d string) string {
	if d == "" {
		return ""
	}
	return ", image " + d
}
