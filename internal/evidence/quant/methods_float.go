package quant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

var fp8DTypes = map[artifact.DType]string{"F8_E4M3": "fp8_e4m3", "F8_E5M2": "fp8_e5m2", "F8_E4M3FNUZ": "fp8_e4m3fnuz", "F8_E5M2FNUZ": "fp8_e5m2fnuz"}

// FP8 recognises native FP8 checkpoints (quant_method "fp8": DeepSeek-V3,
// Qwen3-*-FP8, per-tensor FP8 exports): weight F8_E4M3 with
// weight_scale_inv [ceil(out/b0), ceil(in/b1)] for weight_block_size
// [b0, b1], or weight_scale per tensor ([] or [1]) or per channel
// ([out, 1]); input_scale with a static activation scheme.
type FP8 struct{}

func (FP8) Name() string { return "fp8" }

type fp8Config struct {
	Fmt              *string  `json:"fmt"`
	ActivationScheme *string  `json:"activation_scheme"`
	WeightBlockSize  []int    `json:"weight_block_size"`
	IgnoredLayers    []string `json:"ignored_layers"`
	NotConvert       []string `json:"modules_to_not_convert"`
}

func (FP8) Detect(cfg *Config, h artifact.Headers) (QuantizationSpec, Verdict) {
	var c fp8Config
	if err := json.Unmarshal(cfg.Canonical, &c); err != nil {
		return unsupported(cfg.Method, "fp8 config: "+err.Error())
	}
	if c.Fmt != nil && *c.Fmt != "e4m3" {
		return unsupported(cfg.Method, fmt.Sprintf("fp8 fmt %q is not recognised (e4m3)", *c.Fmt))
	}
	act := "dynamic"
	if c.ActivationScheme != nil {
		act = *c.ActivationScheme
	}
	if act != "dynamic" && act != "static" {
		return unsupported(cfg.Method, fmt.Sprintf("fp8 activation_scheme %q is not recognised", act))
	}
	if c.WeightBlockSize != nil && (len(c.WeightBlockSize) != 2 || c.WeightBlockSize[0] <= 0 || c.WeightBlockSize[1] <= 0) {
		return unsupported(cfg.Method, fmt.Sprintf("fp8 weight_block_size %v is not [rows, cols]", c.WeightBlockSize))
	}
	x := index(h)
	var f findings
	found, moe := 0, false
	strategies, scaleTypes := map[string]bool{}, map[artifact.DType]bool{}
	for _, base := range x.bases(".weight") {
		w := x[base+".weight"]
		if _, ok := fp8DTypes[w.DType]; !ok || len(w.Shape) != 2 {
			continue
		}
		found++
		moe = moe || isExpert(base)
		st, sdt := fp8Scale(&f, x, base, w, c.WeightBlockSize)
		strategies[st], scaleTypes[sdt] = true, true
		if _, ok := x[base+".input_scale"]; act == "static" && !ok {
			f.add("input_scale", fmt.Sprintf("input_scale: %s has a static activation scheme but no input_scale", base))
		}
	}
	strategy := only(strategies)
	scheme := "w8a8_fp8_" + strategy
	spec := QuantizationSpec{
		Method: cfg.Method, WeightFormat: "fp8_e4m3", ActivationFormat: ptr("fp8_e4m3_" + act),
		LinearScheme: &scheme, Bits: ptr(8), BlockShape: slices.Clone(c.WeightBlockSize),
		ZeroPointRepresentation: ptr("none"), ExcludedModules: sortedCopy(append(slices.Clone(c.IgnoredLayers), c.NotConvert...)), Workspaces: []Workspace{},
	}
	if spec.BlockShape == nil {
		spec.BlockShape = []int{}
	}
	if sdt := onlyDType(scaleTypes); sdt != "" {
		inv := ""
		if strategy == "block" {
			inv = "_inv"
		}
		spec.ScaleRepresentation = ptr(strings.ToLower(string(sdt)) + "_" + strategy + inv)
	}
	if moe {
		spec.MoEScheme = &scheme
	}
	return spec, verdictOf(&f, found == 0 || strategy == "mixed", "fp8 config but the headers hold no F8 linear weights with a consistent scale layout")
}

// fp8Scale classifies one FP8 weight's scale tensor.
func fp8Scale(f *findings, x tensors, base string, w artifact.Tensor, block []int) (string, artifact.DType) {
	out, in := w.Shape[0], w.Shape[1]
	if inv, ok := x[base+".weight_scale_inv"]; ok {
		if block == nil {
			f.add("weight_block_size", fmt.Sprintf("weight_block_size: %s has weight_scale_inv but the config states no weight_block_size", base))
			return "block", inv.DType
		}
		b0, b1 := int64(block[0]), int64(block[1])
		if !shapeIs(inv, (out+b0-1)/b0, (in+b1-1)/b1) {
			f.add("block scale", fmt.Sprintf("block scale: %s.weight_scale_inv is %s, want [%d, %d] for blocks %v", base, artifact.ShapeText(inv.Shape), (out+b0-1)/b0, (in+b1-1)/b1, block))
		}
		return "block", inv.DType
	}
	s, ok := x[base+".weight_scale"]
	if !ok {
		f.add("no scale", fmt.Sprintf("no scale: %s is FP8 without weight_scale or weight_scale_inv", base))
		return "none", ""
	}
	if block != nil {
		f.add("weight_block_size", fmt.Sprintf("weight_block_size: config says blocks %v but %s has a weight_scale %s", block, base, artifact.ShapeText(s.Shape)))
	}
	switch {
	case len(s.Shape) == 0 || shapeIs(s, 1):
		return "tensor", s.DType
	case shapeIs(s, out, 1) || shapeIs(s, out):
		return "channel", s.DType
	}
	f.add("scale shape", fmt.Sprintf("scale shape: %s.weight_scale %s is neither per tensor nor per channel", base, artifact.ShapeText(s.Shape)))
	return "mixed", s.DType
}

func only(m map[string]bool) string {
	if len(m) == 1 {
		for k := range m {
			return k
		}
	}
	if len(m) == 0 {
		return "none"
	}
	return "mixed"
}

func onlyDType(m map[artifact.DType]bool) artifact.DType {
	if len(m) == 1 {
		for k := range m {
			return k
		}
	}
	return ""
}

// MXFP4 recognises gpt-oss checkpoints (quant_method "mxfp4"): MoE experts
// stored as U8 …_blocks [E, rows, cols/32, 16] (two E2M1 values per byte)
// with U8 E8M0 exponents …_scales [E, rows, cols/32]; attention, router,
// embeddings and lm_head unquantized (modules_to_not_convert).
type MXFP4 struct{}

func (MXFP4) Name() string { return "mxfp4" }

func (MXFP4) Detect(cfg *Config, h artifact.Headers) (QuantizationSpec, Verdict) {
	var c struct {
		NotConvert []string `json:"modules_to_not_convert"`
	}
	if err := json.Unmarshal(cfg.Canonical, &c); err != nil {
		return unsupported(cfg.Method, "mxfp4 config: "+err.Error())
	}
	x := index(h)
	var f findings
	blocks := x.bases("_blocks")
	for _, b := range blocks {
		bl, sc := x[b+"_blocks"], x[b+"_scales"]
		n := len(bl.Shape)
		if bl.DType != "U8" || n < 2 || bl.Shape[n-1] != 16 {
			f.add("blocks", fmt.Sprintf("blocks: %s_blocks is %s %s, want U8 [..., cols/32, 16]", b, bl.DType, artifact.ShapeText(bl.Shape)))
			continue
		}
		if sc.DType != "U8" || !slices.Equal(sc.Shape, bl.Shape[:n-1]) {
			f.add("scales", fmt.Sprintf("scales: %s_scales is %s %s, want U8 %s (one E8M0 exponent per 32 values)", b, sc.DType, artifact.ShapeText(sc.Shape), artifact.ShapeText(bl.Shape[:n-1])))
		}
	}
	spec := QuantizationSpec{
		Method: cfg.Method, WeightFormat: "fp4_e2m1", ActivationFormat: ptr("unquantized"),
		LinearScheme: ptr("unquantized"), MoEScheme: ptr("mxfp4_experts"), Bits: ptr(4), GroupSize: ptr(32),
		BlockShape: []int{}, ScaleRepresentation: ptr("e8m0_per_32_stored_u8"), ZeroPointRepresentation: ptr("none"),
		ExcludedModules: sortedCopy(c.NotConvert), Workspaces: []Workspace{},
	}
	return spec, verdictOf(&f, len(blocks) == 0, "mxfp4 config but no …_blocks tensors in the headers")
}
