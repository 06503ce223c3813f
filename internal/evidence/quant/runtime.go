package quant

import (
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

// vLLM's online FP8 (--quantization fp8 on an unquantized checkpoint):
// Fp8Config with is_checkpoint_fp8_serialized false quantizes the weight
// of every linear layer built with the quant config to FP8 E4M3 with one
// F32 scale per tensor after loading, and activations dynamically per
// tensor; FusedMoE experts likewise. Embeddings and lm_head are not
// quantized. Source:
// https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/quantization/fp8.py
const onlineFP8Source = "https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/quantization/fp8.py"

// RuntimeFP8 describes serving an unquantized checkpoint with
// --quantization fp8 on the pinned engine version: the runtime transform
// (no new checkpoint), the quantization it produces in memory, and the
// verdict. A checkpoint that is already quantized is unsupported (the
// engine applies its own method then).
func RuntimeFP8(engineVersion string, cfg *Config, h artifact.Headers) (RuntimeTransformSpec, QuantizationSpec, Verdict) {
	rt := RuntimeTransformSpec{
		Kind: RuntimeOnlineFP8, EngineVersion: &engineVersion,
		TargetLayerRules: []string{"linear layers built with the quant config (attention and MLP projections)", "fused MoE experts"},
		Exclusions:       []string{"embed_tokens", "lm_head"},
		Producer:         ptr("vllm"), Version: &engineVersion,
	}
	if cfg != nil {
		spec, v := unsupported(cfg.Method, "--quantization fp8 online conversion applies to unquantized checkpoints; this one is already "+cfg.Method)
		return rt, spec, v
	}
	native, nv := Native{}.Detect(nil, h)
	if nv.Support != Supported {
		spec, v := unsupported("", "--quantization fp8: "+nv.Reason)
		return rt, spec, v
	}
	spec := QuantizationSpec{
		Method: "fp8", WeightFormat: "fp8_e4m3", ActivationFormat: ptr("fp8_e4m3_dynamic_per_tensor"),
		LinearScheme: ptr("w8a8_fp8_tensor"), Bits: ptr(8), BlockShape: []int{},
		ScaleRepresentation: ptr("f32_tensor"), ZeroPointRepresentation: ptr("none"),
		ExcludedModules: []string{"embed_tokens", "lm_head"},
		Workspaces: []Workspace{{
			Kind: "online_fp8_quantize",
			When: "always: each weight is loaded as stored (" + native.WeightFormat + ") and converted after loading",
			// How much of the unquantized model is resident at once
			// depends on the engine version's loader; not modelled.
			Transient: "unknown", PerLinear: []string{"weight_scale F32 []"}, Source: onlineFP8Source,
		}},
	}
	if native.MoEScheme != nil {
		spec.MoEScheme = spec.LinearScheme
	}
	return rt, spec, Verdict{Support: Supported, Disagreements: []string{}}
}

// RuntimeFP8Targets lists the stored weights --quantization fp8 converts:
// floating-point 2-D "…proj….weight" tensors of the decoder layers and
// the stacked expert weights; each becomes one FP8 byte per element plus
// an F32 scale. Embeddings, norms, routers and lm_head keep their dtype.
func RuntimeFP8Targets(h artifact.Headers) []string {
	var out []string
	for _, t := range h.Tensors {
		if _, ok := floatFormats[t.DType]; !ok || !strings.HasPrefix(t.Name, "model.layers.") || !strings.HasSuffix(t.Name, ".weight") {
			continue
		}
		base := strings.TrimSuffix(t.Name, ".weight")
		module := base[strings.LastIndex(base, ".")+1:]
		if len(t.Shape) >= 2 && strings.Contains(module, "proj") {
			out = append(out, t.Name)
		}
	}
	return out
}
