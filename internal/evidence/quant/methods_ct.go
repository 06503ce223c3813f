package quant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

// CompressedTensors recognises llm-compressor checkpoints (quant_method
// "compressed-tensors"): FP8 (float-quantized), W8A8 int8
// (int-quantized), W4A16/W8A16 (pack-quantized), NVFP4
// (nvfp4-pack-quantized). It reads config_groups (targets, weights,
// input_activations, a per-group format), ignore and kv_cache_scheme.
type CompressedTensors struct{}

func (CompressedTensors) Name() string { return "compressed-tensors" }

type ctArgs struct {
	NumBits        *int            `json:"num_bits"`
	Type           *string         `json:"type"`
	Strategy       *string         `json:"strategy"`
	GroupSize      *int            `json:"group_size"`
	BlockStructure json.RawMessage `json:"block_structure"`
	Symmetric      *bool           `json:"symmetric"`
	Dynamic        json.RawMessage `json:"dynamic"`
}

type ctGroup struct {
	Targets          []string `json:"targets"`
	Weights          *ctArgs  `json:"weights"`
	InputActivations *ctArgs  `json:"input_activations"`
	Format           *string  `json:"format"`
}

type ctConfig struct {
	Format         *string            `json:"format"`
	ConfigGroups   map[string]ctGroup `json:"config_groups"`
	Ignore         []string           `json:"ignore"`
	KVCacheScheme  *ctArgs            `json:"kv_cache_scheme"`
	Version        *string            `json:"version"`
	SparsityConfig json.RawMessage    `json:"sparsity_config"`
}

// ctScheme is one config group's recognised scheme.
type ctScheme struct {
	name       string // linear scheme
	weight     string // weight format
	activation string
	bits       int
	group      *int
	block      []int
	strategy   string
	symmetric  bool
	format     string // storage format: pack-quantized, float-quantized, …
}

func (a *ctArgs) str(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

func dynamicText(raw json.RawMessage) string {
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		if b {
			return "dynamic"
		}
		return "static"
	}
	if s := jsonString(raw); s != "" {
		return "dynamic_" + s // "local": NVFP4 dynamic per-group scales with a static global scale
	}
	return "static"
}

func classifyCT(g ctGroup, topFormat string) (ctScheme, error) {
	w := g.Weights
	if w == nil || w.NumBits == nil || w.Type == nil {
		return ctScheme{}, fmt.Errorf("a config group has no weights num_bits/type")
	}
	s := ctScheme{bits: *w.NumBits, strategy: w.str(w.Strategy, "tensor"), symmetric: w.Symmetric == nil || *w.Symmetric, group: w.GroupSize, format: topFormat}
	if g.Format != nil {
		s.format = *g.Format
	}
	if len(w.BlockStructure) > 0 && string(w.BlockStructure) != "null" {
		if err := json.Unmarshal(w.BlockStructure, &s.block); err != nil || len(s.block) != 2 {
			return s, fmt.Errorf("block_structure %s is not [rows, cols]", w.BlockStructure)
		}
	}
	a := g.InputActivations
	actType, actBits := "", 0
	if a != nil && a.NumBits != nil && a.Type != nil {
		actType, actBits = *a.Type, *a.NumBits
	}
	wt := *w.Type
	switch {
	case wt == "float" && s.bits == 8 && actType == "float" && actBits == 8:
		s.name, s.weight = "w8a8_fp8_"+s.strategy, "fp8_e4m3"
		s.activation = "fp8_e4m3_" + dynamicText(a.Dynamic) + "_per_" + a.str(a.Strategy, "tensor")
	case wt == "float" && s.bits == 8 && actType == "":
		s.name, s.weight, s.activation = "w8a16_fp8_"+s.strategy, "fp8_e4m3", "unquantized"
	case wt == "int" && s.bits == 8 && actType == "int" && actBits == 8:
		s.name, s.weight = "w8a8_int8_"+s.strategy, "int8"
		s.activation = "int8_" + dynamicText(a.Dynamic) + "_per_" + a.str(a.Strategy, "tensor")
	case wt == "int" && (s.bits == 4 || s.bits == 8) && actType == "":
		s.name, s.weight, s.activation = fmt.Sprintf("w%da16_int_%s", s.bits, s.strategy), fmt.Sprintf("int%d", s.bits), "unquantized"
	case wt == "float" && s.bits == 4 && actType == "float" && actBits == 4:
		s.name, s.weight, s.activation = "w4a4_nvfp4", "fp4_e2m1", "fp4_e2m1_"+dynamicText(a.Dynamic)+"_per_16"
	case wt == "float" && s.bits == 4 && actType == "":
		s.name, s.weight, s.activation = "w4a16_nvfp4", "fp4_e2m1", "unquantized"
	default:
		return s, fmt.Errorf("weights %s%d with input activations %s%d is not a recognised scheme", wt, s.bits, actType, actBits)
	}
	return s, nil
}

func (CompressedTensors) Detect(cfg *Config, h artifact.Headers) (QuantizationSpec, Verdict) {
	var c ctConfig
	if err := json.Unmarshal(cfg.Canonical, &c); err != nil {
		return unsupported(cfg.Method, "compressed-tensors config: "+err.Error())
	}
	scheme, reason := c.scheme()
	if reason != "" {
		return unsupported(cfg.Method, reason)
	}
	x := index(h)
	var f findings
	found, moe := checkCT(&f, x, scheme)
	spec := c.spec(cfg.Method, scheme)
	if moe {
		spec.MoEScheme = spec.LinearScheme
	}
	return spec, verdictOf(&f, found == 0, "compressed-tensors config but no quantized linear tensors of its scheme in the headers")
}

// scheme is the one scheme every config group uses; the reason says why
// the config is not recognised (sparsity, no groups, mixed schemes).
func (c ctConfig) scheme() (ctScheme, string) {
	if sp := sparsity(c.SparsityConfig); sp != "" {
		return ctScheme{}, "compressed-tensors sparsity format " + sp + " is not recognised"
	}
	if len(c.ConfigGroups) == 0 {
		return ctScheme{}, "compressed-tensors config has no config_groups"
	}
	top := ""
	if c.Format != nil {
		top = *c.Format
	}
	names := make([]string, 0, len(c.ConfigGroups))
	for n := range c.ConfigGroups {
		names = append(names, n)
	}
	slices.Sort(names)
	var scheme ctScheme
	for i, n := range names {
		s, err := classifyCT(c.ConfigGroups[n], top)
		if err != nil {
			return ctScheme{}, "compressed-tensors group " + n + ": " + err.Error()
		}
		if i > 0 && (s.name != scheme.name || !slices.Equal(s.block, scheme.block) || ptrDiffer(s.group, scheme.group)) {
			return ctScheme{}, fmt.Sprintf("compressed-tensors groups %s and %s use different schemes (%s, %s); mixed-scheme checkpoints are not recognised", names[0], n, scheme.name, s.name)
		}
		scheme = s
	}
	return scheme, ""
}

// spec states the scheme as a QuantizationSpec, with the KV cache format
// and the Marlin repack workspace of weight-only int schemes.
func (c ctConfig) spec(method string, scheme ctScheme) QuantizationSpec {
	spec := QuantizationSpec{
		Method: method, WeightFormat: scheme.weight, ActivationFormat: &scheme.activation,
		LinearScheme: &scheme.name, Bits: &scheme.bits, GroupSize: scheme.group, BlockShape: scheme.block,
		ScaleRepresentation: ctScaleRepr(scheme), ExcludedModules: sortedCopy(c.Ignore), ProducerVersion: c.Version,
		Workspaces: []Workspace{},
	}
	if spec.BlockShape == nil {
		spec.BlockShape = []int{}
	}
	spec.ZeroPointRepresentation = ptr("none")
	if !scheme.symmetric {
		spec.ZeroPointRepresentation = ptr("weight_zero_point_per_" + scheme.strategy)
	}
	if kv := c.KVCacheScheme; kv != nil && kv.NumBits != nil && kv.Type != nil {
		k := fmt.Sprintf("%s%d", *kv.Type, *kv.NumBits)
		if k == "float8" {
			k = "fp8_e4m3"
		}
		spec.KVCacheFormat = &k
	}
	if scheme.name == "w4a16_int_group" || scheme.name == "w4a16_int_channel" || scheme.name == "w8a16_int_group" || scheme.name == "w8a16_int_channel" {
		if scheme.group == nil || slices.Contains(marlinGroups, *scheme.group) {
			spec.Workspaces = []Workspace{marlinRepack(false)}
		}
	}
	return spec
}

// ptrDiffer reports whether two optional ints differ.
func ptrDiffer(a, b *int) bool {
	if a == nil || b == nil {
		return a != b
	}
	return *a != *b
}

func sparsity(raw json.RawMessage) string {
	var s struct {
		Format *string `json:"format"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s.Format == nil || *s.Format == "dense" {
		return ""
	}
	return *s.Format
}

func ctScaleRepr(s ctScheme) *string {
	switch {
	case strings.HasPrefix(s.name, "w4a4_nvfp4") || strings.HasPrefix(s.name, "w4a16_nvfp4"):
		return ptr("fp8_e4m3_per_16_with_f32_global")
	case s.strategy == "group" && s.group != nil:
		return ptr(fmt.Sprintf("per_group_%d", *s.group))
	case s.strategy == "block":
		return ptr(fmt.Sprintf("per_block_%v", s.block))
	}
	return ptr("per_" + s.strategy)
}

// checkCT finds the scheme's tensors and checks shapes; it returns how
// many quantized linears it found and whether any is an expert.
func checkCT(f *findings, x tensors, s ctScheme) (int, bool) {
	found, moe := 0, false
	switch {
	case s.weight == "fp4_e2m1":
		for _, b := range x.bases(".weight_packed") {
			p, sc := x[b+".weight_packed"], x[b+".weight_scale"]
			found++
			moe = moe || isExpert(b)
			if p.DType != "U8" || len(p.Shape) != 2 || sc.DType != "F8_E4M3" || !shapeIs(sc, p.Shape[0], p.Shape[1]*2/16) {
				f.add("nvfp4", fmt.Sprintf("nvfp4: %s packed %s %s with scale %s %s, want U8 [out, in/2] and F8_E4M3 [out, in/16]", b, p.DType, artifact.ShapeText(p.Shape), sc.DType, artifact.ShapeText(sc.Shape)))
			}
			if _, ok := x[b+".weight_global_scale"]; !ok {
				f.add("global scale", fmt.Sprintf("global scale: %s has no weight_global_scale", b))
			}
		}
	case strings.HasPrefix(s.name, "w4a16_int") || strings.HasPrefix(s.name, "w8a16_int") || s.format == "pack-quantized":
		for _, b := range x.bases(".weight_packed") {
			p, sc := x[b+".weight_packed"], x[b+".weight_scale"]
			found++
			moe = moe || isExpert(b)
			if p.DType != "I32" || len(p.Shape) != 2 || len(sc.Shape) != 2 {
				f.add("packed", fmt.Sprintf("packed: %s.weight_packed %s %s, want I32 [out, in·bits/32] with a 2-D weight_scale", b, p.DType, artifact.ShapeText(p.Shape)))
				continue
			}
			in := p.Shape[1] * 32 / int64(s.bits)
			if s.group != nil && *s.group > 0 && sc.Shape[1]*int64(*s.group) != in {
				f.add("group_size", fmt.Sprintf("group_size: %s weight_scale %s over %d inputs implies group %d, config says %d", b, artifact.ShapeText(sc.Shape), in, groupOf(in, sc.Shape[1]), *s.group))
			}
			if _, ok := x[b+".weight_zero_point"]; !s.symmetric && !ok {
				f.add("zero point", fmt.Sprintf("zero point: %s is asymmetric but has no weight_zero_point", b))
			}
		}
	default: // fp8 or int8 stored as .weight with .weight_scale
		want := artifact.DType("F8_E4M3")
		if s.weight == "int8" {
			want = "I8"
		}
		for _, b := range x.bases(".weight_scale") {
			w, ok := x[b+".weight"]
			if !ok {
				continue
			}
			found++
			moe = moe || isExpert(b)
			if w.DType != want {
				f.add("weight dtype", fmt.Sprintf("weight dtype: %s.weight is %s, scheme %s stores %s", b, w.DType, s.name, want))
			}
		}
	}
	return found, moe
}
