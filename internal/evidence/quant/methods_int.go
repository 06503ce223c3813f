package quant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

// Native is a checkpoint without quantization settings: weights as
// stored. Packed or FP8 tensors in its headers are a disagreement, and
// the answer is unknown rather than a guess.
type Native struct{}

func (Native) Name() string { return "native" }

var floatFormats = map[artifact.DType]string{"BF16": "bf16", "F16": "f16", "F32": "f32", "F64": "f64"}

func (Native) Detect(_ *Config, h artifact.Headers) (QuantizationSpec, Verdict) {
	x := index(h)
	var f findings
	bytes := map[string]int64{}
	for _, t := range h.Tensors {
		if !strings.HasSuffix(t.Name, ".weight") || len(t.Shape) < 2 {
			continue
		}
		if fm, ok := floatFormats[t.DType]; ok {
			bytes[fm] += t.Bytes
		} else {
			f.add("weight dtype", fmt.Sprintf("weight dtype: %s is %s but there is no quantization config", t.Name, t.DType))
		}
	}
	for _, s := range []string{".qweight", ".weight_packed", ".weight_scale", ".weight_scale_inv", "_blocks", ".SCB", ".absmax"} {
		if x.has(s) {
			f.add("packed tensors", fmt.Sprintf("packed tensors: headers hold *%s tensors but there is no quantization config", s))
		}
	}
	format := ""
	for fm, n := range bytes {
		if format == "" || n > bytes[format] || n == bytes[format] && fm < format {
			format = fm
		}
	}
	if format == "" {
		format = "unknown"
	}
	spec := QuantizationSpec{
		WeightFormat: format, ActivationFormat: ptr("unquantized"), LinearScheme: ptr("unquantized"),
		BlockShape: []int{}, ExcludedModules: []string{}, Workspaces: []Workspace{},
	}
	if b, ok := artifact.DType(strings.ToUpper(format)).Bits(); ok {
		spec.Bits = &b
	}
	if hasMoE(x) {
		spec.MoEScheme = ptr("unquantized")
	}
	return spec, verdictOf(&f, len(f.lines) > 0, "headers hold quantized tensors but the checkpoint states no quantization method")
}

func hasMoE(x tensors) bool {
	for n := range x {
		if strings.Contains(n, ".experts.") {
			return true
		}
	}
	return false
}

// marlinGroups are the group sizes vLLM's Marlin kernels take
// (marlin_utils.MARLIN_SUPPORTED_GROUP_SIZES).
var marlinGroups = []int{-1, 32, 64, 128}

const marlinSource = "https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/quantization/kernels/mixed_precision/marlin.py"

// marlinRepack is the load-time memory of the Marlin path: each packed
// weight is repacked into a new tensor of the same size before the old
// one is freed, layer by layer; with act-order (g_idx) a sort permutation
// is kept per linear. The device workspace (marlin_make_workspace_new) is
// a small per-device buffer.
func marlinRepack(actOrder bool) Workspace {
	w := Workspace{
		Kind:      "marlin_repack",
		When:      "vLLM selects the Marlin kernel (CUDA, compute capability >= 8.0, supported bits/group size)",
		Transient: "largest_packed_weight",
		PerLinear: []string{},
		Source:    marlinSource,
	}
	if actOrder {
		w.PerLinear = []string{"g_idx_sort_indices I32 [in]"}
	}
	return w
}

// AWQ recognises AutoAWQ checkpoints (quant_method "awq", legacy
// quant_config.json with w_bit/q_group_size), GEMM layout: qweight I32
// [in, out·bits/32], qzeros I32 [in/g, out·bits/32], scales F16 [in/g, out].
type AWQ struct{}

func (AWQ) Name() string { return "awq" }

type awqConfig struct {
	Bits       *int     `json:"bits"`
	WBit       *int     `json:"w_bit"`
	GroupSize  *int     `json:"group_size"`
	QGroupSize *int     `json:"q_group_size"`
	ZeroPoint  *bool    `json:"zero_point"`
	Version    *string  `json:"version"`
	NotConvert []string `json:"modules_to_not_convert"`
}

func first(a, b *int) *int {
	if a != nil {
		return a
	}
	return b
}

func (AWQ) Detect(cfg *Config, h artifact.Headers) (QuantizationSpec, Verdict) {
	var c awqConfig
	if err := json.Unmarshal(cfg.Canonical, &c); err != nil {
		return unsupported(cfg.Method, "awq config: "+err.Error())
	}
	bits, group := first(c.Bits, c.WBit), first(c.GroupSize, c.QGroupSize)
	if bits == nil || group == nil {
		return unsupported(cfg.Method, "awq config states no bits/w_bit or group_size/q_group_size")
	}
	version := "gemm"
	if c.Version != nil {
		version = strings.ToLower(*c.Version)
	}
	if version != "gemm" {
		return unsupported(cfg.Method, fmt.Sprintf("awq version %q: only the GEMM layout (qweight [in, out·bits/32]) is recognised", version))
	}
	if *bits != 4 && *bits != 8 {
		return unsupported(cfg.Method, fmt.Sprintf("awq with %d bits is not recognised (4 or 8)", *bits))
	}
	zp := c.ZeroPoint == nil || *c.ZeroPoint
	x := index(h)
	var f findings
	bases := x.bases(".qweight")
	moe := false
	for _, b := range bases {
		moe = moe || isExpert(b)
		checkAWQLinear(&f, x, b, *bits, *group, zp)
	}
	spec := intSpec(cfg.Method, *bits, *group, "w%da16_awq_gemm", "f16_per_group", c.NotConvert, moe)
	spec.ZeroPointRepresentation = ptr("none")
	if zp {
		spec.ZeroPointRepresentation = ptr(fmt.Sprintf("uint%d_packed_i32_per_group", *bits))
	}
	if zp && slices.Contains(marlinGroups, *group) {
		spec.Workspaces = []Workspace{marlinRepack(false)}
	}
	return spec, verdictOf(&f, len(bases) == 0, "awq config but no …qweight tensors in the headers")
}

func intSpec(method string, bits, group int, scheme, scale string, excluded []string, moe bool) QuantizationSpec {
	s := QuantizationSpec{
		Method: method, WeightFormat: fmt.Sprintf("int%d", bits), ActivationFormat: ptr("unquantized"),
		LinearScheme: ptr(fmt.Sprintf(scheme, bits)), Bits: ptr(bits), GroupSize: ptr(group),
		BlockShape: []int{}, ScaleRepresentation: ptr(scale), ExcludedModules: sortedCopy(excluded), Workspaces: []Workspace{},
	}
	if moe {
		s.MoEScheme = s.LinearScheme
	}
	return s
}

// checkAWQLinear compares one AWQ linear's tensors with the config.
func checkAWQLinear(f *findings, x tensors, base string, bits, group int, zp bool) {
	q := x[base+".qweight"]
	sc, ok := x[base+".scales"]
	if q.DType != "I32" || len(q.Shape) != 2 {
		f.add("qweight", fmt.Sprintf("qweight: %s.qweight is %s %s, want I32 [in, out·bits/32]", base, q.DType, artifact.ShapeText(q.Shape)))
		return
	}
	if !ok || len(sc.Shape) != 2 {
		f.add("scales", fmt.Sprintf("scales: %s has no 2-D scales tensor", base))
		return
	}
	in, out := q.Shape[0], sc.Shape[1]
	if q.Shape[1]*32/int64(bits) != out {
		f.add("bits", fmt.Sprintf("bits: %s.qweight %s and scales %s imply %d-bit packing, config says %d", base, artifact.ShapeText(q.Shape), artifact.ShapeText(sc.Shape), 32*q.Shape[1]/max(out, 1), bits))
	}
	if g := groupOf(in, sc.Shape[0]); g != group {
		f.add("group_size", fmt.Sprintf("group_size: %s scales %s over %d inputs imply group %d, config says %d", base, artifact.ShapeText(sc.Shape), in, g, group))
	}
	if z, ok := x[base+".qzeros"]; zp && (!ok || z.DType != "I32") {
		f.add("qzeros", fmt.Sprintf("qzeros: %s has zero_point true but no I32 qzeros", base))
	}
}

// groupOf is the group size scales rows imply over in inputs (-1 for one row).
func groupOf(in, rows int64) int {
	if rows <= 1 {
		return -1
	}
	if in%rows != 0 {
		return 0
	}
	return int(in / rows)
}

// GPTQ recognises AutoGPTQ/GPTQModel checkpoints (quant_method "gptq",
// legacy quantize_config.json): qweight I32 [in·bits/32, out] packed along
// the input, qzeros I32 [groups, out·bits/32], scales F16 [groups, out],
// g_idx I32 [in].
type GPTQ struct{}

func (GPTQ) Name() string { return "gptq" }

type gptqConfig struct {
	Bits             *int            `json:"bits"`
	GroupSize        *int            `json:"group_size"`
	DescAct          *bool           `json:"desc_act"`
	Sym              *bool           `json:"sym"`
	DampPercent      *float64        `json:"damp_percent"`
	TrueSequential   *bool           `json:"true_sequential"`
	CheckpointFormat *string         `json:"checkpoint_format"`
	IsMarlinFormat   *bool           `json:"is_marlin_format"`
	Dataset          json.RawMessage `json:"dataset"`
	Meta             *struct {
		Quantizer json.RawMessage `json:"quantizer"`
	} `json:"meta"`
}

func (GPTQ) Detect(cfg *Config, h artifact.Headers) (QuantizationSpec, Verdict) {
	var c gptqConfig
	if err := json.Unmarshal(cfg.Canonical, &c); err != nil {
		return unsupported(cfg.Method, "gptq config: "+err.Error())
	}
	if c.Bits == nil || c.GroupSize == nil {
		return unsupported(cfg.Method, "gptq config states no bits or group_size")
	}
	format := "gptq"
	if c.CheckpointFormat != nil {
		format = *c.CheckpointFormat
	}
	if format == "marlin" || c.IsMarlinFormat != nil && *c.IsMarlinFormat {
		return unsupported(cfg.Method, "gptq checkpoint_format marlin (pre-packed Marlin layout) is not recognised")
	}
	if format != "gptq" && format != "gptq_v2" {
		return unsupported(cfg.Method, fmt.Sprintf("gptq checkpoint_format %q is not recognised", format))
	}
	bits, group := *c.Bits, *c.GroupSize
	if !slices.Contains([]int{2, 3, 4, 8}, bits) {
		return unsupported(cfg.Method, fmt.Sprintf("gptq with %d bits is not recognised (2, 3, 4 or 8)", bits))
	}
	actOrder := c.DescAct != nil && *c.DescAct
	sym := c.Sym == nil || *c.Sym
	x := index(h)
	var f findings
	bases := x.bases(".qweight")
	moe := false
	for _, b := range bases {
		moe = moe || isExpert(b)
		checkGPTQLinear(&f, x, b, bits, group)
	}
	spec := intSpec(cfg.Method, bits, group, "w%da16_gptq", "f16_per_group", nil, moe)
	zp := fmt.Sprintf("uint%d_packed_i32_per_group", bits)
	if format == "gptq" {
		zp += "_stored_minus_one" // v1 stores zero points minus one
	}
	spec.ZeroPointRepresentation = &zp
	spec.CalibrationRecipe = gptqRecipe(c, actOrder, sym)
	if ds := jsonString(c.Dataset); ds != "" {
		spec.CalibrationDataset = &ds
	}
	if c.Meta != nil {
		if q := firstString(c.Meta.Quantizer); q != "" {
			spec.ProducerVersion = &q
		}
	}
	if (bits == 4 || bits == 8) && sym && slices.Contains(marlinGroups, group) {
		spec.Workspaces = []Workspace{marlinRepack(actOrder)}
	}
	return spec, verdictOf(&f, len(bases) == 0, "gptq config but no …qweight tensors in the headers")
}

func gptqRecipe(c gptqConfig, actOrder, sym bool) *string {
	parts := []string{fmt.Sprintf("desc_act=%t", actOrder), fmt.Sprintf("sym=%t", sym)}
	if c.DampPercent != nil {
		parts = append(parts, fmt.Sprintf("damp_percent=%g", *c.DampPercent))
	}
	if c.TrueSequential != nil {
		parts = append(parts, fmt.Sprintf("true_sequential=%t", *c.TrueSequential))
	}
	slices.Sort(parts)
	s := "gptq:" + strings.Join(parts, ",")
	return &s
}

func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

func firstString(raw json.RawMessage) string {
	if s := jsonString(raw); s != "" {
		return s
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil && len(ss) > 0 {
		return ss[0]
	}
	return ""
}

func checkGPTQLinear(f *findings, x tensors, base string, bits, group int) {
	q := x[base+".qweight"]
	sc, ok := x[base+".scales"]
	if q.DType != "I32" || len(q.Shape) != 2 {
		f.add("qweight", fmt.Sprintf("qweight: %s.qweight is %s %s, want I32 [in·bits/32, out]", base, q.DType, artifact.ShapeText(q.Shape)))
		return
	}
	if !ok || len(sc.Shape) != 2 {
		f.add("scales", fmt.Sprintf("scales: %s has no 2-D scales tensor", base))
		return
	}
	in := int64(0)
	if g, ok := x[base+".g_idx"]; ok && len(g.Shape) == 1 {
		in = g.Shape[0]
	} else if group > 0 {
		in = sc.Shape[0] * int64(group)
	}
	if in > 0 && q.Shape[0]*32 != in*int64(bits) {
		f.add("bits", fmt.Sprintf("bits: %s.qweight has %d rows for %d inputs (%d-bit packing), config says %d", base, q.Shape[0], in, q.Shape[0]*32/in, bits))
	}
	if in > 0 {
		if g := groupOf(in, sc.Shape[0]); g != group && !(group == -1 && sc.Shape[0] == 1) {
			f.add("group_size", fmt.Sprintf("group_size: %s scales %s over %d inputs imply group %d, config says %d", base, artifact.ShapeText(sc.Shape), in, g, group))
		}
	}
}
