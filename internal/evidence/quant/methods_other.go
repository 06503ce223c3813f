package quant

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

// BitsAndBytes recognises bitsandbytes settings (quant_method
// "bitsandbytes"): pre-quantized 4-bit checkpoints (weight U8 packed, with
// weight.absmax, weight.quant_map and weight.quant_state.bitsandbytes__nf4
// or __fp4), pre-quantized 8-bit ones (weight I8 with SCB), or in-flight
// quantization of an unquantized checkpoint. Detection only: the GPU
// bytes of in-flight quantization are not modelled, so that case is
// unknown.
type BitsAndBytes struct{}

func (BitsAndBytes) Name() string { return "bitsandbytes" }

type bnbConfig struct {
	LoadIn4bit   *bool    `json:"load_in_4bit"`
	LoadIn8bit   *bool    `json:"load_in_8bit"`
	QuantType    *string  `json:"bnb_4bit_quant_type"`
	ComputeDType *string  `json:"bnb_4bit_compute_dtype"`
	DoubleQuant  *bool    `json:"bnb_4bit_use_double_quant"`
	QuantStorage *string  `json:"bnb_4bit_quant_storage"`
	SkipModules  []string `json:"llm_int8_skip_modules"`
}

func (BitsAndBytes) Detect(cfg *Config, h artifact.Headers) (QuantizationSpec, Verdict) {
	var c bnbConfig
	if err := json.Unmarshal(cfg.Canonical, &c); err != nil {
		return unsupported(cfg.Method, "bitsandbytes config: "+err.Error())
	}
	four, eight := c.LoadIn4bit != nil && *c.LoadIn4bit, c.LoadIn8bit != nil && *c.LoadIn8bit
	if four == eight {
		return unsupported(cfg.Method, "bitsandbytes config must set exactly one of load_in_4bit and load_in_8bit")
	}
	x := index(h)
	var f findings
	spec := QuantizationSpec{Method: cfg.Method, ActivationFormat: ptr("unquantized"), BlockShape: []int{}, ZeroPointRepresentation: ptr("none"), ExcludedModules: sortedCopy(c.SkipModules), Workspaces: []Workspace{}}
	var pre int
	if four {
		qt := "fp4"
		if c.QuantType != nil {
			qt = strings.ToLower(*c.QuantType)
		}
		if qt != "nf4" && qt != "fp4" {
			return unsupported(cfg.Method, fmt.Sprintf("bitsandbytes 4-bit quant type %q is not recognised (nf4, fp4)", qt))
		}
		spec.WeightFormat, spec.Bits, spec.LinearScheme = qt, ptr(4), ptr("bnb_"+qt)
		spec.ScaleRepresentation = ptr("f32_absmax_per_block")
		if c.DoubleQuant != nil && *c.DoubleQuant {
			spec.ScaleRepresentation = ptr("u8_absmax_double_quant_per_block")
		}
		pre = len(x.bases(".weight.quant_state.bitsandbytes__" + qt))
		if other := map[string]string{"nf4": "fp4", "fp4": "nf4"}[qt]; x.has(".weight.quant_state.bitsandbytes__" + other) {
			f.add("quant type", fmt.Sprintf("quant type: config says %s but headers carry bitsandbytes__%s quant states", qt, other))
		}
	} else {
		spec.WeightFormat, spec.Bits, spec.LinearScheme = "int8", ptr(8), ptr("bnb_llm_int8")
		spec.ScaleRepresentation = ptr("f32_per_row_scb")
		pre = len(x.bases(".SCB"))
	}
	if hasMoE(x) {
		spec.MoEScheme = spec.LinearScheme
	}
	if pre == 0 {
		return spec, Verdict{Support: Unknown, Disagreements: f.list(),
			Reason: "bitsandbytes in-flight quantization: the checkpoint holds unquantized weights that the engine quantizes at load; the resulting GPU bytes are not modelled"}
	}
	return spec, verdictOf(&f, false, "")
}

// ModelOpt recognises NVIDIA ModelOpt checkpoints (quant_method
// "modelopt" in config.json, or hf_quant_config.json with producer and a
// quantization block): NVFP4 (weight U8 [out, in/2], weight_scale
// F8_E4M3 [out, in/16], weight_scale_2 and input_scale F32) and FP8
// (weight F8_E4M3, weight_scale and input_scale F32 per tensor), with
// kv_cache_quant_algo.
type ModelOpt struct{}

func (ModelOpt) Name() string { return "modelopt" }

type modeloptQuant struct {
	QuantAlgo        *string  `json:"quant_algo"`
	KVCacheQuantAlgo *string  `json:"kv_cache_quant_algo"`
	GroupSize        *int     `json:"group_size"`
	ExcludeModules   []string `json:"exclude_modules"`
}

func (ModelOpt) Detect(cfg *Config, h artifact.Headers) (QuantizationSpec, Verdict) {
	var c struct {
		modeloptQuant
		Quantization *modeloptQuant `json:"quantization"`
		Producer     *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"producer"`
	}
	if err := json.Unmarshal(cfg.Canonical, &c); err != nil {
		return unsupported(cfg.Method, "modelopt config: "+err.Error())
	}
	q := c.modeloptQuant
	if c.Quantization != nil {
		q = *c.Quantization
	}
	if q.QuantAlgo == nil {
		return unsupported(cfg.Method, "modelopt config states no quant_algo")
	}
	algo := strings.ToUpper(*q.QuantAlgo)
	spec := QuantizationSpec{Method: cfg.Method, BlockShape: []int{}, ZeroPointRepresentation: ptr("none"), ExcludedModules: sortedCopy(q.ExcludeModules), Workspaces: []Workspace{}}
	if c.Producer != nil && c.Producer.Version != "" {
		spec.ProducerVersion = ptr(c.Producer.Name + " " + c.Producer.Version)
	}
	if q.KVCacheQuantAlgo != nil {
		kv := map[string]string{"FP8": "fp8_e4m3", "NVFP4": "fp4_e2m1"}[strings.ToUpper(*q.KVCacheQuantAlgo)]
		if kv == "" {
			kv = "unknown:" + *q.KVCacheQuantAlgo
		}
		spec.KVCacheFormat = &kv
	}
	x := index(h)
	var f findings
	var found int
	switch algo {
	case "NVFP4":
		found = modeloptNVFP4(&spec, &f, x, q.GroupSize)
	case "FP8":
		found = modeloptFP8(&spec, &f, x)
	default:
		return unsupported(cfg.Method, fmt.Sprintf("modelopt quant_algo %q is not recognised (NVFP4, FP8)", *q.QuantAlgo))
	}
	if hasMoE(x) {
		spec.MoEScheme = spec.LinearScheme
	}
	return spec, verdictOf(&f, found == 0, "modelopt config but no quantized linear tensors of "+algo+" in the headers")
}

// modeloptNVFP4 states ModelOpt's NVFP4 scheme (group 16 unless the config
// says otherwise) and checks each quantized linear's packed weight and
// scale shapes; it returns how many it found.
func modeloptNVFP4(spec *QuantizationSpec, f *findings, x tensors, group *int) int {
	g := 16
	if group != nil {
		g = *group
	}
	spec.WeightFormat, spec.ActivationFormat, spec.LinearScheme = "fp4_e2m1", ptr("fp4_e2m1_dynamic_per_16"), ptr("w4a4_nvfp4")
	spec.Bits, spec.GroupSize, spec.ScaleRepresentation = ptr(4), ptr(g), ptr("fp8_e4m3_per_16_with_f32_global")
	found := 0
	for _, b := range x.bases(".weight_scale_2") {
		w, s := x[b+".weight"], x[b+".weight_scale"]
		found++
		if w.DType != "U8" || len(w.Shape) != 2 || s.DType != "F8_E4M3" || !shapeIs(s, w.Shape[0], w.Shape[1]*2/int64(g)) {
			f.add("nvfp4", fmt.Sprintf("nvfp4: %s weight %s %s with scale %s %s, want U8 [out, in/2] and F8_E4M3 [out, in/%d]", b, w.DType, artifact.ShapeText(w.Shape), s.DType, artifact.ShapeText(s.Shape), g))
		}
	}
	return found
}

// modeloptFP8 states ModelOpt's static per-tensor FP8 scheme and checks
// that each linear with an input scale stores FP8 weights.
func modeloptFP8(spec *QuantizationSpec, f *findings, x tensors) int {
	spec.WeightFormat, spec.ActivationFormat, spec.LinearScheme = "fp8_e4m3", ptr("fp8_e4m3_static_per_tensor"), ptr("w8a8_fp8_tensor")
	spec.Bits, spec.ScaleRepresentation = ptr(8), ptr("f32_tensor")
	found := 0
	for _, b := range x.bases(".input_scale") {
		if w, ok := x[b+".weight"]; ok {
			found++
			if _, isFP8 := fp8DTypes[w.DType]; !isFP8 {
				f.add("weight dtype", fmt.Sprintf("weight dtype: %s.weight is %s, want F8_E4M3", b, w.DType))
			}
		}
	}
	return found
}
