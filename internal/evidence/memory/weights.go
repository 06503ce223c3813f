package memory

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

// WeightBreakdown is what one rank holds after loading, by origin. All
// figures are derived from the tensor headers and the pinned facts.
type WeightBreakdown struct {
	// TensorBytes is the rank's share of the checkpoint tensors at the
	// dtype vLLM allocates them in (quantized payloads, scales, zero
	// points and g_idx at their header bytes).
	TensorBytes int64 `json:"tensor_bytes"`
	// VocabPaddingBytes are the embedding/lm_head rows added by vocab
	// padding on this rank.
	VocabPaddingBytes int64 `json:"vocab_padding_bytes"`
	// MXFP4PaddingBytes are the expert rows added by MXFP4 intermediate
	// padding.
	MXFP4PaddingBytes int64 `json:"mxfp4_padding_bytes"`
	// RopeCacheBytes is the rotary cos/sin cache.
	RopeCacheBytes int64 `json:"rope_cache_bytes"`
	// MLAAbsorbedBytes are the W_UK/W_UV copies MLA backends derive.
	MLAAbsorbedBytes int64 `json:"mla_absorbed_bytes"`
	// KernelExtraBytes are tensors the quantization kernel keeps beyond
	// the checkpoint's (Marlin's g_idx sort permutation with act-order).
	KernelExtraBytes int64 `json:"kernel_extra_bytes"`
	Tensors          int   `json:"tensors"`
}

// stageStats are per-stage facts the load workspace needs.
type stageStats struct {
	MaxPacked int64 // largest packed quantized weight partition (qweight, weight_packed)
	GIdx      int64 // the stage's g_idx bytes
}

// Total is every byte of the breakdown.
func (w WeightBreakdown) Total() int64 {
	return w.TensorBytes + w.VocabPaddingBytes + w.MXFP4PaddingBytes + w.RopeCacheBytes + w.MLAAbsorbedBytes + w.KernelExtraBytes
}

// topology is the resolved parallel layout. TP shards attention and
// dense layers; every DP rank holds a whole TP copy of them. The fused-MoE
// layer instead spans every TP × DP device (FusedMoEParallelConfig.make,
// flatten_tp_across_dp_and_pcp): with --enable-expert-parallel, EP = TP ×
// DP ranks each hold whole experts; without it, every expert is split
// TP × DP ways on its intermediate dimension ("When TP = 1, DP = 2 and
// EP = False … the tensors are sharded across 2 devices").
// https://github.com/vllm-project/vllm/blob/00c1c6a2054b7027369c2a460cc2181a9b86293d/vllm/model_executor/layers/fused_moe/config.py
type topology struct {
	TP, PP, DP, EP int
	// Stages are the [start, end) layer ranges of each pipeline stage.
	Stages [][2]int64
}

func newTopology(l LaunchConfig, layers int64) (topology, error) {
	t := topology{TP: l.TP, PP: l.PP, DP: l.DP, EP: 1}
	if t.TP < 1 || t.PP < 1 || t.DP < 1 {
		return topology{}, fmt.Errorf("launch: tp, pp and dp must be ≥ 1 (got tp=%d pp=%d dp=%d)", t.TP, t.PP, t.DP)
	}
	if int64(t.PP) > layers {
		return topology{}, fmt.Errorf("launch: pp=%d exceeds the model's %d layers", t.PP, layers)
	}
	if l.EnableExpertParallel {
		t.EP = t.TP * t.DP
	}
	t.Stages = ppStages(layers, t.PP)
	return t, nil
}

// moeTP is how many ways the fused-MoE layer splits each expert: 1 under
// expert parallelism (whole experts), else TP × DP.
func (t topology) moeTP() int64 {
	if t.EP > 1 {
		return 1
	}
	return int64(t.TP * t.DP)
}

// ppStages splits layers as vLLM's get_pp_indices does: layers // pp per
// stage, the remainder added one each to partitions[-2], [-3], … so the
// last stage (which also holds the final norm and lm_head) never grows.
func ppStages(layers int64, pp int) [][2]int64 {
	parts := make([]int64, pp)
	for i := range parts {
		parts[i] = layers / int64(pp)
	}
	rem := int(layers % int64(pp))
	for i := 2; i < rem+2; i++ {
		parts[pp-i]++
	}
	out := make([][2]int64, pp)
	var start int64
	for i, n := range parts {
		out[i] = [2]int64{start, start + n}
		start += n
	}
	return out
}

func (t topology) stageOf(layer int64) int {
	for i, s := range t.Stages {
		if layer >= s[0] && layer < s[1] {
			return i
		}
	}
	return -1
}

// localExperts is how many of n experts EP rank 0 holds, and whether
// expert e is among them (vLLM's linear placement: the first n % ep ranks
// hold one more).
func localExperts(n int64, ep int) (count int64, holds func(e int64) bool) {
	base, rem := n/int64(ep), n%int64(ep)
	count = base
	if rem > 0 {
		count++
	}
	return count, func(e int64) bool { return e >= 0 && e < count }
}

// weightCalc holds what the per-tensor walk needs.
type weightCalc struct {
	arch       ArchFacts
	facts      EngineFacts
	topo       topology
	rules      RuleSet
	params     map[string]ParamRule
	modelBytes int64 // bytes per element of the model dtype
	f32Scales  bool
}

// tensorMatch is a tensor's rule and what its name captured.
type tensorMatch struct {
	rule   *ShardRule
	param  ParamRule
	layer  int64 // -1 when the tensor is not in a layer
	expert int64 // -1 when the tensor is not one expert's
}

// weightsPerStage computes each pipeline stage's heaviest rank. A tensor
// the rules do not cover, a layout the calculator does not model or a
// split vLLM would refuse makes the whole component unknown: the reasons
// come back and the figures must not be used.
func weightsPerStage(a ArchFacts, h artifact.Headers, f EngineFacts, topo topology, modelBytes int64) ([]WeightBreakdown, []stageStats, []string) {
	wc, reason := newWeightCalc(a, f, topo, modelBytes)
	if reason != "" {
		return nil, nil, []string{reason}
	}
	out, stats, reasons := wc.sumTensors(h)
	if len(reasons) > 0 {
		return nil, nil, reasons
	}
	wc.addDerived(out)
	return out, stats, nil
}

// newWeightCalc picks the family's sharding rules and the quantization's
// scale handling from the pinned facts; the reason says what they lack.
func newWeightCalc(a ArchFacts, f EngineFacts, topo topology, modelBytes int64) (*weightCalc, string) {
	if !slices.Contains(f.Weights.SupportedQuant, a.Quant.Method) {
		return nil, fmt.Sprintf("weights: quantization method %q is not modelled by the pinned facts for vLLM %s", a.Quant.Method, f.Version)
	}
	var rs *RuleSet
	for i := range f.RuleSets {
		if f.RuleSets[i].Family == a.Family {
			rs = &f.RuleSets[i]
		}
	}
	if rs == nil {
		return nil, fmt.Sprintf("weights: no sharding rules for model family %s in the pinned facts", a.Family)
	}
	wc := &weightCalc{arch: a, facts: f, topo: topo, rules: *rs, params: map[string]ParamRule{}, modelBytes: modelBytes}
	for _, p := range f.Params {
		wc.params[p.Suffix] = p
	}
	method := a.Quant.Method
	if a.Quant.Format != "" {
		method += ":" + a.Quant.Format
	}
	wc.f32Scales = slices.Contains(f.Weights.ScalesAsFloat32, method) || slices.Contains(f.Weights.ScalesAsFloat32, a.Quant.Method)
	return wc, ""
}

// sumTensors adds every loaded tensor's per-rank bytes to the stages that
// hold it; the reasons name the tensors no rule explains.
func (wc weightCalc) sumTensors(h artifact.Headers) ([]WeightBreakdown, []stageStats, []string) {
	a := wc.arch
	out := make([]WeightBreakdown, wc.topo.PP)
	stats := make([]stageStats, wc.topo.PP)
	var reasons, unmatched []string
	nUnmatched := 0
	for _, t := range h.Tensors {
		if l, ok := layerIndex(t.Name); ok && l >= a.NumLayers && wc.rules.ExtraLayers == "skip" {
			continue // multi-token-prediction layers vLLM does not load
		}
		m, ok := wc.match(t.Name)
		if !ok {
			nUnmatched++
			if len(unmatched) < 3 {
				unmatched = append(unmatched, t.Name)
			}
			continue
		}
		per, reason, use := wc.tensorShare(t, m)
		if reason != "" {
			reasons = append(reasons, reason)
		}
		if !use {
			continue
		}
		for _, s := range wc.stages(m) {
			out[s].add(per)
			stats[s].note(t.Name, per.TensorBytes)
		}
	}
	if nUnmatched > 0 {
		reasons = append(reasons, fmt.Sprintf("weights: %d tensors match no sharding rule of family %s (e.g. %s); no even split is assumed", nUnmatched, a.Family, strings.Join(unmatched, ", ")))
	}
	return out, stats, reasons
}

// tensorShare is one matched tensor's per-rank bytes, or use=false when vLLM
// does not load it (with a reason when the tensor contradicts the config).
func (wc weightCalc) tensorShare(t artifact.Tensor, m tensorMatch) (per WeightBreakdown, reason string, use bool) {
	a := wc.arch
	switch {
	case m.rule.Kind == "skip":
		return per, "", false
	case m.layer >= a.NumLayers:
		return per, fmt.Sprintf("weights: tensor %s is in layer %d of a %d-layer model", t.Name, m.layer, a.NumLayers), false
	case m.rule.Pattern == "lm_head" && a.TieWordEmbeddings:
		return per, "", false // vLLM skips lm_head.weight when embeddings are tied
	}
	per, err := wc.perRank(t, m)
	if err != nil {
		return per, "weights: " + err.Error(), false
	}
	return per, "", true
}

// note records the tensors the quantized-kernel workspace sizes from.
func (s *stageStats) note(name string, bytes int64) {
	switch lastSeg(name) {
	case "qweight", "weight_packed":
		s.MaxPacked = max(s.MaxPacked, bytes)
	case "g_idx", "weight_g_idx":
		s.GIdx += bytes
	}
}

func (w *WeightBreakdown) add(p WeightBreakdown) {
	w.TensorBytes += p.TensorBytes
	w.VocabPaddingBytes += p.VocabPaddingBytes
	w.MXFP4PaddingBytes += p.MXFP4PaddingBytes
	w.Tensors += p.Tensors
}

// stages lists the pipeline stages that hold a tensor.
func (wc weightCalc) stages(m tensorMatch) []int {
	last := wc.topo.PP - 1
	switch {
	case m.layer >= 0:
		return []int{wc.topo.stageOf(m.layer)}
	case m.rule.Stage == "first":
		// With tied embeddings the last stage's lm_head is a second copy
		// of embed_tokens (vLLM loads it there when PP > 1).
		if m.rule.Kind == "vocab" && wc.arch.TieWordEmbeddings && last > 0 {
			return []int{0, last}
		}
		return []int{0}
	case m.rule.Stage == "last":
		return []int{last}
	default:
		return []int{0}
	}
}

// match finds the first rule covering name.
func (wc weightCalc) match(name string) (tensorMatch, bool) {
	segs := strings.Split(name, ".")
	for i := range wc.rules.Rules {
		r := &wc.rules.Rules[i]
		pat := strings.Split(r.Pattern, ".")
		if r.Exact {
			if len(segs) != len(pat) {
				continue
			}
			if layer, expert, ok := matchSegs(pat, segs); ok {
				return tensorMatch{rule: r, param: ParamRule{OutDim: -1, InDim: -1}, layer: layer, expert: expert}, true
			}
			continue
		}
		if len(segs) != len(pat)+1 {
			continue
		}
		layer, expert, ok := matchSegs(pat, segs[:len(pat)])
		if !ok {
			continue
		}
		p, known := wc.params[segs[len(pat)]]
		if !known {
			continue
		}
		return tensorMatch{rule: r, param: p, layer: layer, expert: expert}, true
	}
	return tensorMatch{}, false
}

// layerIndex reads N from a "model.layers.N." tensor name.
func layerIndex(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "model.layers.")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest[:max(0, strings.IndexByte(rest, '.'))], 10, 64)
	return n, err == nil
}

func matchSegs(pat, segs []string) (layer, expert int64, ok bool) {
	layer, expert = -1, -1
	for i, p := range pat {
		switch p {
		case "#":
			n, err := strconv.ParseInt(segs[i], 10, 64)
			if err != nil || n < 0 {
				return 0, 0, false
			}
			layer = n
		case "*":
			n, err := strconv.ParseInt(segs[i], 10, 64)
			if err != nil || n < 0 {
				return 0, 0, false
			}
			expert = n
		default:
			if p != segs[i] {
				return 0, 0, false
			}
		}
	}
	return layer, expert, true
}

var floatDTypes = map[artifact.DType]bool{"F16": true, "BF16": true, "F32": true, "F64": true}

// loadedBytes is what a tensor costs once vLLM has allocated it: plain
// float weights in the model dtype, float32 scales for the methods that
// allocate them so, every other payload at its header bytes.
func (wc weightCalc) loadedBytes(t artifact.Tensor, m tensorMatch) (int64, error) {
	if !floatDTypes[t.DType] {
		return t.Bytes, nil
	}
	n, ok := artifact.Elements(t.Shape)
	if !ok {
		return 0, fmt.Errorf("tensor %s: shape %v has no element count", t.Name, t.Shape)
	}
	switch {
	case m.param.Aux && wc.f32Scales && strings.Contains(lastSeg(t.Name), "scale"):
		return n * 4, nil
	case m.param.Aux:
		return t.Bytes, nil
	case wc.facts.Weights.FloatAsModelDType:
		return n * wc.modelBytes, nil
	}
	return t.Bytes, nil
}

func lastSeg(name string) string { return name[strings.LastIndex(name, ".")+1:] }

// perRank is the share of one tensor a rank holds.
func (wc weightCalc) perRank(t artifact.Tensor, m tensorMatch) (WeightBreakdown, error) {
	b, err := wc.loadedBytes(t, m)
	if err != nil {
		return WeightBreakdown{}, err
	}
	switch m.rule.Kind {
	case "replicated":
		return WeightBreakdown{TensorBytes: b, Tensors: 1}, nil
	case "vocab":
		return wc.vocab(t, b, m)
	case "expert_column", "expert_row":
		return wc.expert(t, b, m)
	case "fused_expert":
		return wc.fusedExpert(t, b, m)
	}
	dim, parts, err := wc.splitAxis(t.Name, m)
	if err != nil {
		return WeightBreakdown{}, err
	}
	v, err := splitDim(t, b, dim, parts)
	return WeightBreakdown{TensorBytes: v, Tensors: 1}, err
}

// splitAxis is the dimension a tensor-parallel kind splits and into how
// many parts, refusing the head counts vLLM refuses to split.
func (wc weightCalc) splitAxis(name string, m tensorMatch) (dim int, parts int64, err error) {
	tp := int64(wc.topo.TP)
	a := wc.arch
	switch m.rule.Kind {
	case "column":
		return m.param.OutDim, tp, nil
	case "row":
		return m.param.InDim, tp, nil
	case "heads":
		return m.rule.TPDim, tp, nil
	case "qkv_q":
		if a.NumHeads%tp != 0 {
			return 0, 0, fmt.Errorf("num_attention_heads %d is not divisible by tp %d (vLLM refuses the split)", a.NumHeads, tp)
		}
		return m.param.OutDim, tp, nil
	case "qkv_kv":
		kv := a.NumKVHeads
		if kv >= tp {
			if kv%tp != 0 {
				return 0, 0, fmt.Errorf("num_key_value_heads %d is not divisible by tp %d (vLLM refuses the split)", kv, tp)
			}
			return m.param.OutDim, tp, nil
		}
		if tp%kv != 0 {
			return 0, 0, fmt.Errorf("tp %d is not a multiple of num_key_value_heads %d (vLLM refuses the replication)", tp, kv)
		}
		// TP exceeds the KV heads: each rank keeps one whole head.
		return m.param.OutDim, kv, nil
	}
	return 0, 0, fmt.Errorf("tensor %s: sharding kind %q is not implemented", name, m.rule.Kind)
}

// splitDim divides a tensor along dim into parts; a dimension of size 1
// (a per-channel scale's second dim) or a scalar is not split.
func splitDim(t artifact.Tensor, b int64, dim int, parts int64) (int64, error) {
	if parts == 1 || dim < 0 || dim >= len(t.Shape) || t.Shape[dim] == 1 {
		return b, nil
	}
	if t.Shape[dim]%parts != 0 {
		return 0, fmt.Errorf("tensor %s: dim %d (%d) is not divisible by %d (vLLM refuses the split)", t.Name, dim, t.Shape[dim], parts)
	}
	return ceilDiv(b, parts), nil
}

// vocab splits a vocabulary-parallel embedding: rows padded to the pinned
// multiple, then an equal share per TP rank.
func (wc weightCalc) vocab(t artifact.Tensor, b int64, m tensorMatch) (WeightBreakdown, error) {
	if m.param.Aux || m.param.OutDim != 0 || len(t.Shape) != 2 {
		return WeightBreakdown{}, fmt.Errorf("tensor %s: a quantized or non-2-D vocabulary-parallel tensor is not modelled", t.Name)
	}
	rows, tp := t.Shape[0], int64(wc.topo.TP)
	pad := wc.facts.Weights.VocabPadding
	padded := ceilDiv(rows, pad) * pad
	if padded%tp != 0 {
		return WeightBreakdown{}, fmt.Errorf("tensor %s: %d padded rows are not divisible by tp %d (vLLM refuses the split)", t.Name, padded, tp)
	}
	rowBytes := b / rows
	perRows := padded / tp
	// The real rows are spread over the ranks first; padding fills the
	// rest. Every rank allocates perRows rows.
	realShare := min(perRows, rows)
	return WeightBreakdown{TensorBytes: realShare * rowBytes, VocabPaddingBytes: (perRows - realShare) * rowBytes, Tensors: 1}, nil
}

// expert places one expert's tensor: whole on its EP rank (EP rank 0 is
// the heaviest), else split like a column/row linear over TP × DP.
func (wc weightCalc) expert(t artifact.Tensor, b int64, m tensorMatch) (WeightBreakdown, error) {
	if wc.arch.MoE == nil || m.expert < 0 || m.expert >= wc.arch.MoE.NumExperts {
		return WeightBreakdown{}, fmt.Errorf("tensor %s: expert index outside the config's expert count", t.Name)
	}
	if wc.topo.EP > 1 {
		_, holds := localExperts(wc.arch.MoE.NumExperts, wc.topo.EP)
		if holds(m.expert) {
			return WeightBreakdown{TensorBytes: b, Tensors: 1}, nil
		}
		return WeightBreakdown{}, nil
	}
	dim := m.param.OutDim
	if m.rule.Kind == "expert_row" {
		dim = m.param.InDim
	}
	v, err := splitDim(t, b, dim, wc.topo.moeTP())
	return WeightBreakdown{TensorBytes: v, Tensors: 1}, err
}

// fusedExpert splits an all-experts tensor: ExpertDim by EP, or TPDim by
// TP × DP, then pads an MXFP4 intermediate dimension per partition.
func (wc weightCalc) fusedExpert(t artifact.Tensor, b int64, m tensorMatch) (WeightBreakdown, error) {
	moe := wc.arch.MoE
	r := m.rule
	if moe == nil || r.ExpertDim < 0 || r.ExpertDim >= len(t.Shape) || t.Shape[r.ExpertDim] != moe.NumExperts {
		return WeightBreakdown{}, fmt.Errorf("tensor %s: expert dimension does not hold the config's %d experts", t.Name, expertCount(moe))
	}
	inter := moe.ExpertIntermediate
	perPart := inter
	var v int64
	if wc.topo.EP > 1 {
		n, _ := localExperts(moe.NumExperts, wc.topo.EP)
		v = b / moe.NumExperts * n
	} else {
		var err error
		if v, err = splitDim(t, b, r.TPDim, wc.topo.moeTP()); err != nil {
			return WeightBreakdown{}, err
		}
		if r.TPDim >= 0 {
			perPart = inter / wc.topo.moeTP()
		}
	}
	out := WeightBreakdown{TensorBytes: v, Tensors: 1}
	if r.PadIntermediate {
		pad := wc.facts.Weights.MXFP4IntermediatePad
		if pad <= 0 || perPart <= 0 {
			return WeightBreakdown{}, fmt.Errorf("tensor %s: MXFP4 intermediate padding is not pinned for vLLM %s", t.Name, wc.facts.Version)
		}
		padded := ceilDiv(perPart, pad) * pad
		out.MXFP4PaddingBytes = v*padded/perPart - v
	}
	return out, nil
}

func expertCount(m *MoEFacts) int64 {
	if m == nil {
		return 0
	}
	return m.NumExperts
}

// addDerived adds what loading creates beyond the checkpoint tensors: the
// rotary cache on every rank and the MLA absorbed projections per layer.
func (wc weightCalc) addDerived(out []WeightBreakdown) {
	a := wc.arch
	for s := range out {
		if wc.facts.Weights.RopeCache && a.RotaryDim > 0 {
			out[s].RopeCacheBytes = a.MaxPosition * a.RotaryDim * wc.modelBytes
		}
		if wc.facts.Weights.MLAAbsorbedCopy && a.MLA != nil {
			layers := wc.topo.Stages[s][1] - wc.topo.Stages[s][0]
			headsRank := a.NumHeads / int64(wc.topo.TP)
			perLayer := headsRank * (a.MLA.QKNopeHeadDim + a.MLA.VHeadDim) * a.MLA.KVLoraRank * wc.modelBytes
			out[s].MLAAbsorbedBytes = layers * perLayer
		}
	}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
