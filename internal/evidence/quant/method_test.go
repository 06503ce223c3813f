package quant_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
	"github.com/narwhal-go/narwhal/internal/evidence/quant"
)

// tiny is a small Llama-shaped model; quantized layouts apply to it
// exactly as to the full-size presets.
func tiny() fixture.Dense {
	return fixture.Dense{
		Architecture: "LlamaForCausalLM", ModelType: "llama", Hidden: 256, Intermediate: 512, Layers: 2,
		Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 1024, MaxPositions: 4096, RopeTheta: 10000, DType: "BF16", TorchDType: "bfloat16",
	}
}

// cfg builds a Config from a quantization_config JSON text.
func cfg(t *testing.T, file, text string) *quant.Config {
	t.Helper()
	b, err := canon.Canonicalize([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	c, err := quant.ConfigFrom(artifact.QuantConfig{File: file, Path: "quantization_config", Canonical: b, Digest: canon.Digest(b)})
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// Real quantization_config blocks, each from the published config.json
// (or the issue quoting it) named beside it, against fixture headers of
// the same layout.
func TestDetectPublishedConfigs(t *testing.T) {
	base := fixture.Build(tiny(), 1)
	moe := fixture.Build(fixture.MoE{Dense: tiny(), Experts: 4, ExpertsPerToken: 2, ExpertIntermediate: 128}, 1)
	cases := []struct {
		name    string
		source  string
		file    string
		config  string
		heads   fixture.Spec
		support quant.Support
		weight  string
		scheme  string
		act     string
		bits    any
		group   any
		block   []int
		kv      any
		exclude []string
		repack  bool
	}{
		{
			name:   "awq gemm",
			source: "https://huggingface.co/QuantTrio/DeepSeek-V3.2-Exp-AWQ/blob/main/config.json (quoted in vllm-project/vllm issue on modules_to_not_convert)",
			file:   "config.json",
			config: `{"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": true, "modules_to_not_convert": ["mlp.gate.", "indexer", "model.layers.0."]}`,
			heads:  fixture.Must(fixture.AWQ(base, 128)), support: quant.Supported,
			weight: "int4", scheme: "w4a16_awq_gemm", act: "unquantized", bits: 4, group: 128,
			exclude: []string{"indexer", "mlp.gate.", "model.layers.0."}, repack: true,
		},
		{
			name:   "awq legacy quant_config.json",
			source: "AutoAWQ quant_config {zero_point, q_group_size, w_bit, version: GEMM} (https://github.com/casper-hansen/AutoAWQ README)",
			file:   "quant_config.json",
			config: `{"zero_point": true, "q_group_size": 128, "w_bit": 4, "version": "GEMM"}`,
			heads:  fixture.Must(fixture.AWQ(base, 128)), support: quant.Supported,
			weight: "int4", scheme: "w4a16_awq_gemm", act: "unquantized", bits: 4, group: 128, exclude: []string{}, repack: true,
		},
		{
			name:   "gptq act-order",
			source: "https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4/blob/main/config.json",
			file:   "config.json",
			config: `{"bits": 4, "damp_percent": 0.1, "dataset": null, "desc_act": true, "group_size": 128, "modules_in_block_to_quantize": null, "quant_method": "gptq", "sym": true, "true_sequential": true}`,
			heads:  fixture.Must(fixture.GPTQ(base, 4, 128, true)), support: quant.Supported,
			weight: "int4", scheme: "w4a16_gptq", act: "unquantized", bits: 4, group: 128, exclude: []string{}, repack: true,
		},
		{
			name:   "gptq legacy quantize_config.json",
			source: "AutoGPTQ quantize_config.json (TheBloke GPTQ repositories, e.g. https://huggingface.co/TheBloke/Llama-2-7B-GPTQ/blob/main/quantize_config.json)",
			file:   "quantize_config.json",
			config: `{"bits": 4, "group_size": 128, "damp_percent": 0.1, "desc_act": false, "sym": true, "true_sequential": true, "model_name_or_path": null, "model_file_base_name": "model"}`,
			heads:  fixture.Must(fixture.GPTQ(base, 4, 128, false)), support: quant.Supported,
			weight: "int4", scheme: "w4a16_gptq", act: "unquantized", bits: 4, group: 128, exclude: []string{}, repack: true,
		},
		{
			name:   "fp8 block (Qwen3 FP8)",
			source: "https://huggingface.co/Qwen/Qwen3-8B-FP8/blob/main/config.json",
			file:   "config.json",
			config: `{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}`,
			heads:  fixture.Must(fixture.FP8Block(base, 128, 128, "BF16")), support: quant.Supported,
			weight: "fp8_e4m3", scheme: "w8a8_fp8_block", act: "fp8_e4m3_dynamic", bits: 8, block: []int{128, 128}, exclude: []string{},
		},
		{
			name:   "fp8 block MoE (DeepSeek-V3 style, F32 scales)",
			source: "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
			file:   "config.json",
			config: `{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}`,
			heads:  fixture.Must(fixture.FP8Block(moe, 128, 128, "F32")), support: quant.Supported,
			weight: "fp8_e4m3", scheme: "w8a8_fp8_block", act: "fp8_e4m3_dynamic", bits: 8, block: []int{128, 128}, exclude: []string{},
		},
		{
			name:   "compressed-tensors FP8 dynamic (channel)",
			source: "https://huggingface.co/RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic/blob/main/config.json",
			file:   "config.json",
			config: `{"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false, "observer": "minmax"}, "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": true, "dynamic": true, "observer": null}, "output_activations": null}}, "ignore": ["lm_head"], "kv_cache_scheme": null, "quantization_status": "compressed"}`,
			heads:  fixture.Must(fixture.FP8Channel(base)), support: quant.Supported,
			weight: "fp8_e4m3", scheme: "w8a8_fp8_channel", act: "fp8_e4m3_dynamic_per_token", bits: 8, exclude: []string{"lm_head"},
		},
		{
			name:   "compressed-tensors W8A8 int8",
			source: "https://huggingface.co/RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8/blob/main/config.json",
			file:   "config.json",
			config: `{"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": true, "dynamic": false}, "input_activations": {"num_bits": 8, "type": "int", "strategy": "token", "symmetric": true, "dynamic": true}}}, "ignore": ["lm_head"], "kv_cache_scheme": null}`,
			heads:  fixture.Must(fixture.W8A8Int8(base)), support: quant.Supported,
			weight: "int8", scheme: "w8a8_int8_channel", act: "int8_dynamic_per_token", bits: 8, exclude: []string{"lm_head"},
		},
		{
			name:   "compressed-tensors W4A16 with FP8 KV",
			source: "https://huggingface.co/RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16/blob/main/config.json (kv_cache_scheme as llm-compressor writes it)",
			file:   "config.json",
			config: `{"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": true, "dynamic": false, "actorder": null}, "input_activations": null, "output_activations": null}}, "ignore": ["lm_head"], "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false, "symmetric": true}, "version": "0.6.0"}`,
			heads:  fixture.Must(fixture.W4A16(base, 128)), support: quant.Supported,
			weight: "int4", scheme: "w4a16_int_group", act: "unquantized", bits: 4, group: 128, kv: "fp8_e4m3", exclude: []string{"lm_head"}, repack: true,
		},
		{
			name:   "compressed-tensors W8A16 group 32 (per-group format)",
			source: "https://github.com/vllm-project/llm-compressor/issues/1914 (Qwen3-VL config.json quoted there)",
			file:   "config.json",
			config: `{"config_groups": {"group_0": {"format": "pack-quantized", "input_activations": null, "output_activations": null, "targets": ["Linear"], "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": 32, "num_bits": 8, "observer": "mse", "observer_kwargs": {}, "strategy": "group", "symmetric": true, "type": "int"}}}, "format": "pack-quantized", "global_compression_ratio": null, "ignore": ["model.visual.blocks.0.attn.qkv"], "kv_cache_scheme": null, "quant_method": "compressed-tensors", "quantization_status": "compressed"}`,
			heads:  fixture.Must(fixture.W4A16(base, 32)), support: quant.Supported, // layout checked below
			weight: "int8", scheme: "w8a16_int_group", act: "unquantized", bits: 8, group: 32, exclude: []string{"model.visual.blocks.0.attn.qkv"}, repack: true,
		},
		{
			name:   "compressed-tensors NVFP4",
			source: "https://huggingface.co/RedHatAI/Meta-Llama-3.1-8B-Instruct-NVFP4/blob/main/config.json",
			file:   "config.json",
			config: `{"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": true, "dynamic": false}, "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": true, "dynamic": "local"}}}, "ignore": ["lm_head"], "kv_cache_scheme": null}`,
			heads:  fixture.Must(fixture.NVFP4CompressedTensors(base)), support: quant.Supported,
			weight: "fp4_e2m1", scheme: "w4a4_nvfp4", act: "fp4_e2m1_dynamic_local_per_16", bits: 4, group: 16, exclude: []string{"lm_head"},
		},
		{
			name:   "modelopt NVFP4",
			source: "https://huggingface.co/nvidia/Llama-3.1-8B-Instruct-FP4/blob/main/hf_quant_config.json",
			file:   "hf_quant_config.json",
			config: `{"producer": {"name": "modelopt", "version": "0.23.0"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16, "exclude_modules": ["lm_head"]}}`,
			heads:  fixture.Must(fixture.NVFP4ModelOpt(base)), support: quant.Supported,
			weight: "fp4_e2m1", scheme: "w4a4_nvfp4", act: "fp4_e2m1_dynamic_per_16", bits: 4, group: 16, kv: "fp8_e4m3", exclude: []string{"lm_head"},
		},
		{
			name:    "gpt-oss mxfp4",
			source:  "https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json",
			file:    "config.json",
			config:  `{"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}`,
			heads:   fixture.Spec{Tensors: fixture.GptOss{Hidden: 256, Intermediate: 256, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 512, Experts: 4, ExpertsPerToken: 2, SlidingWindow: 128}.Tensors()},
			support: quant.Supported,
			weight:  "fp4_e2m1", scheme: "unquantized", act: "unquantized", bits: 4, group: 32,
			exclude: []string{"lm_head", "model.embed_tokens", "model.layers.*.mlp.router", "model.layers.*.self_attn"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := fixture.InMemory(t, c.heads)
			if c.name == "compressed-tensors W8A16 group 32 (per-group format)" {
				h = fixture.InMemory(t, w8a16(t, base, 32))
			}
			spec, v := quant.Detect(cfg(t, c.file, c.config), h, quant.Methods())
			if v.Support != c.support {
				t.Fatalf("support %s (%s) disagreements %v", v.Support, v.Reason, v.Disagreements)
			}
			if len(v.Disagreements) != 0 {
				t.Errorf("disagreements %v", v.Disagreements)
			}
			if spec.WeightFormat != c.weight || deref(spec.LinearScheme) != c.scheme || deref(spec.ActivationFormat) != c.act {
				t.Errorf("formats %s / %v / %v", spec.WeightFormat, deref(spec.LinearScheme), deref(spec.ActivationFormat))
			}
			if deref(spec.Bits) != c.bits || deref(spec.GroupSize) != c.group || deref(spec.KVCacheFormat) != c.kv {
				t.Errorf("bits %v group %v kv %v", deref(spec.Bits), deref(spec.GroupSize), deref(spec.KVCacheFormat))
			}
			if c.block == nil {
				c.block = []int{}
			}
			if !slices.Equal(spec.BlockShape, c.block) || !slices.Equal(spec.ExcludedModules, c.exclude) {
				t.Errorf("block %v excluded %v", spec.BlockShape, spec.ExcludedModules)
			}
			if got := len(spec.Workspaces) == 1 && spec.Workspaces[0].Kind == "marlin_repack"; got != c.repack {
				t.Errorf("marlin repack workspace %v, want %v", spec.Workspaces, c.repack)
			}
			if err := spec.Validate(); err != nil {
				t.Error(err)
			}
			if spec.ScaleRepresentation == nil || spec.ZeroPointRepresentation == nil {
				t.Errorf("scale %v zero point %v", spec.ScaleRepresentation, spec.ZeroPointRepresentation)
			}
		})
	}
}

// w8a16 is the pack-quantized int8 layout: weight_packed I32 [out, in/4].
func w8a16(t *testing.T, s fixture.Spec, group int64) fixture.Spec {
	t.Helper()
	var out fixture.Spec
	for _, ten := range s.Tensors {
		if !fixture.Quantizable(ten.Name, ten.Shape) {
			out.Tensors = append(out.Tensors, ten)
			continue
		}
		b := strings.TrimSuffix(ten.Name, ".weight")
		o, in := ten.Shape[0], ten.Shape[1]
		out.Tensors = append(out.Tensors,
			fixture.Tensor{Name: b + ".weight_packed", DType: "I32", Shape: []int64{o, in / 4}},
			fixture.Tensor{Name: b + ".weight_scale", DType: "BF16", Shape: []int64{o, in / group}},
			fixture.Tensor{Name: b + ".weight_shape", DType: "I64", Shape: []int64{2}})
	}
	return out
}

func TestAWQDetectFromHeaders(t *testing.T) {
	h := fixture.InMemory(t, fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128)))
	spec, v := quant.AWQ{}.Detect(cfg(t, "config.json", `{"quant_method":"awq","bits":4,"group_size":128,"zero_point":true,"version":"gemm"}`), h)
	if v.Support != quant.Supported || *spec.ZeroPointRepresentation != "uint4_packed_i32_per_group" {
		t.Fatalf("%v %v", v, deref(spec.ZeroPointRepresentation))
	}
	// No packed tensors at all: the config alone settles nothing.
	_, v = quant.AWQ{}.Detect(cfg(t, "config.json", `{"quant_method":"awq","bits":4,"group_size":128}`), fixture.InMemory(t, fixture.Build(tiny(), 1)))
	if v.Support != quant.Unknown || !strings.Contains(v.Reason, "no …qweight") {
		t.Fatalf("%+v", v)
	}
}

func TestGPTQDetectFromHeaders(t *testing.T) {
	h := fixture.InMemory(t, fixture.Must(fixture.GPTQ(fixture.Build(tiny(), 1), 4, 128, true)))
	spec, v := quant.Detect(cfg(t, "config.json", `{"quant_method":"gptq","bits":4,"group_size":128,"desc_act":true,"sym":true,"damp_percent":0.01,"meta":{"quantizer":["gptqmodel:1.2.1"]}}`), h, quant.Methods())
	if v.Support != quant.Supported {
		t.Fatalf("%+v", v)
	}
	if !slices.Equal(spec.Workspaces[0].PerLinear, []string{"g_idx_sort_indices I32 [in]"}) || spec.Workspaces[0].Transient != "largest_packed_weight" {
		t.Errorf("act-order Marlin workspace %+v", spec.Workspaces)
	}
	if deref(spec.ProducerVersion) != "gptqmodel:1.2.1" || deref(spec.CalibrationRecipe) != "gptq:damp_percent=0.01,desc_act=true,sym=true" {
		t.Errorf("producer %v recipe %v", deref(spec.ProducerVersion), deref(spec.CalibrationRecipe))
	}
	if deref(spec.ZeroPointRepresentation) != "uint4_packed_i32_per_group_stored_minus_one" {
		t.Errorf("zero point %v", deref(spec.ZeroPointRepresentation))
	}
	// Asymmetric GPTQ has no Marlin path in vLLM: no repack workspace.
	spec, _ = quant.Detect(cfg(t, "config.json", `{"quant_method":"gptq","bits":4,"group_size":128,"sym":false}`), h, quant.Methods())
	if len(spec.Workspaces) != 0 {
		t.Errorf("asymmetric gptq workspaces %v", spec.Workspaces)
	}
	// 8-bit GPTQ packs four values per I32.
	h8 := fixture.InMemory(t, fixture.Must(fixture.GPTQ(fixture.Build(tiny(), 1), 8, 128, false)))
	if spec, v := quant.Detect(cfg(t, "config.json", `{"quant_method":"gptq","bits":8,"group_size":128}`), h8, quant.Methods()); v.Support != quant.Supported || spec.WeightFormat != "int8" {
		t.Fatalf("8-bit: %v %+v", spec.WeightFormat, v)
	}
}

func TestFP8BlockDetect(t *testing.T) {
	h := fixture.InMemory(t, fixture.Must(fixture.FP8Block(fixture.Build(tiny(), 1), 128, 128, "F32")))
	spec, v := quant.Detect(cfg(t, "config.json", `{"quant_method":"fp8","fmt":"e4m3","activation_scheme":"dynamic","weight_block_size":[128,128]}`), h, quant.Methods())
	if v.Support != quant.Supported || deref(spec.ScaleRepresentation) != "f32_block_inv" || !slices.Equal(spec.BlockShape, []int{128, 128}) {
		t.Fatalf("%+v %v %v", v, deref(spec.ScaleRepresentation), spec.BlockShape)
	}
	// A block config over per-channel headers: recorded, headers win, unknown.
	hc := fixture.InMemory(t, fixture.Must(fixture.FP8Channel(fixture.Build(tiny(), 1))))
	_, v = quant.Detect(cfg(t, "config.json", `{"quant_method":"fp8","weight_block_size":[128,128]}`), hc, quant.Methods())
	if len(v.Disagreements) == 0 || !strings.Contains(v.Disagreements[0], "weight_block_size") {
		t.Fatalf("%+v", v)
	}
}

func TestCompressedTensorsW4A16Detect(t *testing.T) {
	h := fixture.InMemory(t, fixture.Must(fixture.W4A16(fixture.Build(tiny(), 1), 128)))
	c := `{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":{"targets":["Linear"],"weights":{"num_bits":4,"type":"int","strategy":"group","group_size":128,"symmetric":true}}},"ignore":["lm_head"]}`
	spec, v := quant.Detect(cfg(t, "config.json", c), h, quant.Methods())
	if v.Support != quant.Supported || spec.WeightFormat != "int4" || deref(spec.ScaleRepresentation) != "per_group_128" {
		t.Fatalf("%+v %+v", spec, v)
	}
	asym := strings.Replace(c, `"symmetric":true`, `"symmetric":false`, 1)
	_, v = quant.Detect(cfg(t, "config.json", asym), h, quant.Methods())
	if len(v.Disagreements) == 0 || !strings.Contains(v.Disagreements[0], "no weight_zero_point") {
		t.Fatalf("asymmetric without zero points: %+v", v)
	}
}

// A disagreement between quantization_config and the headers is recorded,
// one line per kind with a count; the headers decide the bytes.
func TestConfigHeaderDisagreementRecorded(t *testing.T) {
	h := fixture.InMemory(t, fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128)))
	spec, v := quant.Detect(cfg(t, "config.json", `{"quant_method":"awq","bits":4,"group_size":64,"zero_point":true}`), h, quant.Methods())
	if len(v.Disagreements) != 1 || !strings.Contains(v.Disagreements[0], "imply group 128, config says 64") || !strings.Contains(v.Disagreements[0], "more like it") {
		t.Fatalf("disagreements %v", v.Disagreements)
	}
	if deref(spec.GroupSize) != 64 {
		t.Errorf("the spec records what the config states; the disagreement says what the headers hold")
	}
}

func TestUnknownMethodUnsupported(t *testing.T) {
	for _, m := range []string{"hqq", "torchao", "quark", "auto-round", "fbgemm_fp8", "brand-new-2027"} {
		spec, v := quant.Detect(cfg(t, "config.json", `{"quant_method":"`+m+`","bits":3}`), fixture.InMemory(t, fixture.Build(tiny(), 1)), quant.Methods())
		if v.Support != quant.Unsupported || !strings.Contains(v.Reason, `"`+m+`"`) || spec.Method != m || spec.WeightFormat != "unknown" {
			t.Errorf("%s: %+v %+v", m, spec, v)
		}
		if _, err := json.Marshal(spec); err != nil {
			t.Error(err)
		}
	}
}

func TestMethodAliases(t *testing.T) {
	h := fixture.InMemory(t, fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128)))
	for _, m := range []string{"awq_marlin", "AWQ", "auto_awq"} {
		spec, v := quant.Detect(cfg(t, "config.json", `{"quant_method":"`+m+`","bits":4,"group_size":128}`), h, quant.Methods())
		if v.Support != quant.Supported || spec.Method != m {
			t.Errorf("%s: %+v", m, v)
		}
	}
}

func TestNativeCheckpoint(t *testing.T) {
	spec, v := quant.Detect(nil, fixture.InMemory(t, fixture.Build(tiny(), 1)), quant.Methods())
	if v.Support != quant.Supported || spec.WeightFormat != "bf16" || deref(spec.Bits) != 16 || spec.Method != "" {
		t.Fatalf("%+v %+v", spec, v)
	}
	// Packed tensors without any quantization config: unknown, never a guess.
	_, v = quant.Detect(nil, fixture.InMemory(t, fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128))), quant.Methods())
	if v.Support != quant.Unknown || len(v.Disagreements) == 0 {
		t.Fatalf("%+v", v)
	}
}

func TestBitsAndBytesDetect(t *testing.T) {
	c := `{"quant_method":"bitsandbytes","load_in_4bit":true,"load_in_8bit":false,"bnb_4bit_quant_type":"nf4","bnb_4bit_compute_dtype":"bfloat16","bnb_4bit_use_double_quant":true,"llm_int8_skip_modules":["lm_head"]}`
	// Source: the BitsAndBytesConfig fields transformers writes
	// (https://huggingface.co/docs/transformers/main_classes/quantization#transformers.BitsAndBytesConfig),
	// e.g. unsloth/llama-3-8b-bnb-4bit/config.json.
	pre := fixture.Spec{}
	for _, ten := range fixture.Build(tiny(), 1).Tensors {
		if !fixture.Quantizable(ten.Name, ten.Shape) {
			pre.Tensors = append(pre.Tensors, ten)
			continue
		}
		n := ten.Shape[0] * ten.Shape[1]
		pre.Tensors = append(pre.Tensors,
			fixture.Tensor{Name: ten.Name, DType: "U8", Shape: []int64{n / 2, 1}},
			fixture.Tensor{Name: ten.Name + ".absmax", DType: "U8", Shape: []int64{n / 64}},
			fixture.Tensor{Name: ten.Name + ".nested_absmax", DType: "F32", Shape: []int64{n / 64 / 256}},
			fixture.Tensor{Name: ten.Name + ".nested_quant_map", DType: "F32", Shape: []int64{256}},
			fixture.Tensor{Name: ten.Name + ".quant_map", DType: "F32", Shape: []int64{16}},
			fixture.Tensor{Name: ten.Name + ".quant_state.bitsandbytes__nf4", DType: "U8", Shape: []int64{117}})
	}
	spec, v := quant.Detect(cfg(t, "config.json", c), fixture.InMemory(t, pre), quant.Methods())
	if v.Support != quant.Supported || spec.WeightFormat != "nf4" || deref(spec.ScaleRepresentation) != "u8_absmax_double_quant_per_block" {
		t.Fatalf("%+v %+v", spec, v)
	}
	_, v = quant.Detect(cfg(t, "config.json", c), fixture.InMemory(t, fixture.Build(tiny(), 1)), quant.Methods())
	if v.Support != quant.Unknown || !strings.Contains(v.Reason, "in-flight") {
		t.Fatalf("in-flight: %+v", v)
	}
}

func TestRuntimeFP8(t *testing.T) {
	h := fixture.InMemory(t, fixture.Build(tiny(), 1))
	rt, spec, v := quant.RuntimeFP8("0.11.0", nil, h)
	if v.Support != quant.Supported || rt.Kind != quant.RuntimeOnlineFP8 || spec.WeightFormat != "fp8_e4m3" || spec.Workspaces[0].Transient != "unknown" {
		t.Fatalf("%+v %+v %+v", rt, spec, v)
	}
	if got := len(quant.RuntimeFP8Targets(h)); got != 2*7 {
		t.Errorf("%d targets, want 14 (7 projections × 2 layers)", got)
	}
	_, _, v = quant.RuntimeFP8("0.11.0", cfg(t, "config.json", `{"quant_method":"awq","bits":4,"group_size":128}`), h)
	if v.Support != quant.Unsupported {
		t.Errorf("online fp8 over an AWQ checkpoint: %+v", v)
	}
}
