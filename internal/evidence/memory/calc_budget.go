package memory

import (
	"fmt"
	"math"
)

// budget applies the version's accounting per stage: requested memory
// minus weights, activation peak, non-torch and the applied CUDA-graph
// estimate is the KV budget; blocks, tokens, concurrency, the feasible
// max_model_len and the fit follow from it.
func (pl *planner) budget() {
	p, l := &pl.p, pl.p.Launch
	p.RequestedBytes = requested(p.Hardware.TotalMemoryBytes, l.GPUMemoryUtilization, pl.f.Accounting.RequestedRounding)
	if pl.f.Accounting.Formula != "requested_minus_non_kv" {
		r := fmt.Sprintf("accounting formula %q of vLLM %s is not implemented", pl.f.Accounting.Formula, pl.f.Version)
		pl.unknown(r)
		p.AvailableKVBytes = unknownComponent(r)
		return
	}
	overheadsKnown := p.ActivationPeak.Known() && p.NonTorch.Known() && (!p.CUDAGraphApplied || p.CUDAGraphEstimate.Known())
	if len(p.Ranks) == 0 || pl.layout.PerTokenLayer == 0 || l.KVCacheMemoryBytes == nil && !overheadsKnown {
		p.AvailableKVBytes = unknownComponent("available KV memory: depends on unknown components (see unknown_reasons)")
		return
	}
	avail := make([]Component, len(p.Ranks))
	for i := range p.Ranks {
		avail[i] = pl.available(p.Ranks[i].WeightBytes)
	}
	pl.blocks(avail)
	pl.fit(avail)
}

// requested is ceil(total × util) (or the float product truncated, as the
// earlier versions kept it).
func requested(total int64, util float64, rounding string) int64 {
	v := float64(total) * util
	if rounding == "ceil" {
		return int64(math.Ceil(v))
	}
	return int64(v)
}

// available is one stage's KV budget with its band: the lower edge takes
// the weights and every overhead at their upper edges.
func (pl *planner) available(weights Component) Component {
	p := pl.p
	if kb := p.Launch.KVCacheMemoryBytes; kb != nil {
		// --kv-cache-memory: profiling is skipped and the value is the
		// budget; gpu_memory_utilization is ignored.
		return derived(*kb, pl.src[:1])
	}
	cg := Component{Status: StatusDerived}
	if p.CUDAGraphApplied {
		cg = p.CUDAGraphEstimate
	}
	r := p.RequestedBytes
	c := Component{
		Bytes:  r - weights.Bytes - p.ActivationPeak.Bytes - p.NonTorch.Bytes - cg.Bytes,
		Lower:  r - weights.Upper - p.ActivationPeak.Upper - p.NonTorch.Upper - cg.Upper,
		Upper:  r - weights.Lower - p.ActivationPeak.Lower - p.NonTorch.Lower - cg.Lower,
		Status: StatusPredicted,
	}
	c.Source = sortedUnique(append(append(append([]string{}, p.ActivationPeak.Source...), p.NonTorch.Source...), cg.Source...))
	return pl.widenForFallback(c)
}

// widenForFallback widens the available-KV band when the facts are the
// nearest pinned range standing in for another version (FallbackNote).
func (pl *planner) widenForFallback(c Component) Component {
	fb := pl.f.Fallback
	if fb == nil {
		return c
	}
	w := int64(math.Ceil(float64(pl.p.RequestedBytes) * fallbackWidenFraction(fb.Distance)))
	c.Lower -= w
	c.Upper += w
	return c
}

// blocks fills the block count (the minimum over stages), token capacity
// and concurrency.
func (pl *planner) blocks(avail []Component) {
	p, lay := &pl.p, pl.layout
	l := p.Launch
	p.NumBlocks = -1
	bind := 0
	for i := range p.Ranks {
		st := pl.topo.Stages[i]
		gs := stageGroupSize(lay.Groups, st)
		p.Ranks[i].AvailableKVBytes = avail[i]
		p.Ranks[i].NumBlocks = lay.numBlocks(avail[i].Bytes, gs)
		p.Ranks[i].KVBytesPerToken = lay.kvBytesPerTokenStage(st)
		p.Ranks[i].NeededKVBytes = lay.neededBytes(st, l.MaxModelLen, l.MaxNumBatchedTokens)
		if p.NumBlocks < 0 || p.Ranks[i].NumBlocks < p.NumBlocks {
			p.NumBlocks, bind = p.Ranks[i].NumBlocks, i
		}
	}
	p.AvailableKVBytes = avail[bind]
	p.KVCapacityTokens = lay.tokens(p.NumBlocks)
	if p.BlocksPerRequest > 0 {
		p.MaxConcurrencyAtMaxLen = math.Round(float64(p.NumBlocks)/float64(p.BlocksPerRequest)*100) / 100
	}
	budgets := make([]int64, len(avail))
	for i, a := range avail {
		budgets[i] = a.Bytes
	}
	p.MaxFeasibleModelLen = lay.maxFeasibleLen(pl.topo.Stages, budgets, l.MaxNumBatchedTokens, pl.a.MaxPosition)
}

// fit decides fits / does not fit at the lower edge of the band (so a
// "fits" is not an over-promise) and records the margin of the worst
// stage. When the version does not subtract CUDA graphs from the KV
// budget, they are taken from the memory above gpu_memory_utilization,
// which must hold their upper edge.
func (pl *planner) fit(avail []Component) {
	p := &pl.p
	margin := int64(math.MaxInt64)
	for i, r := range p.Ranks {
		margin = min(margin, avail[i].Lower-r.NeededKVBytes)
		if avail[i].Lower <= 0 {
			margin = min(margin, avail[i].Lower)
		}
	}
	p.MarginBytes = margin
	p.Fits = margin >= 0
	if kb := p.Launch.KVCacheMemoryBytes; kb != nil {
		pl.physicalFit(*kb)
		return
	}
	if p.CUDAGraphApplied || p.Launch.EnforceEager {
		return
	}
	headroom := p.Hardware.TotalMemoryBytes - p.RequestedBytes
	switch {
	case !p.CUDAGraphEstimate.Known():
		pl.note("CUDA-graph capture memory is unknown; whether it fits above gpu_memory_utilization is not checked")
	case p.CUDAGraphEstimate.Upper > headroom:
		p.Fits = false
		pl.note(fmt.Sprintf("CUDA-graph capture may take up to %d bytes, more than the %d bytes above gpu_memory_utilization", p.CUDAGraphEstimate.Upper, headroom))
	}
}

// physicalFit checks a --kv-cache-memory plan against the device: the
// configured KV budget plus everything else must fit in total memory.
func (pl *planner) physicalFit(kv int64) {
	p := &pl.p
	comps := []Component{p.ActivationPeak, p.NonTorch, p.CUDAGraphEstimate}
	need := kv + p.WeightBytesPerRank.Bytes
	for _, c := range comps {
		if !c.Known() {
			pl.unknown("--kv-cache-memory: " + c.Reason + "; the device fit cannot be checked")
			p.Fits = false
			return
		}
		need += c.Upper
	}
	if need > p.Hardware.TotalMemoryBytes {
		p.Fits = false
		pl.note(fmt.Sprintf("weights + configured KV + overheads (upper edge) = %d bytes exceed the device's %d", need, p.Hardware.TotalMemoryBytes))
	}
}

// finish makes the record's collections non-nil and its status final.
func (pl *planner) finish() Prediction {
	p := pl.p
	for _, c := range []*Component{&p.WeightBytesPerRank, &p.ActivationPeak, &p.NonTorch, &p.CUDAGraphEstimate, &p.AvailableKVBytes, &p.LoadWorkspace} {
		if c.Status == "" {
			*c = unknownComponent("not computed: an earlier step is unknown")
		}
		if c.Source == nil {
			c.Source = []string{}
		}
	}
	for i := range p.Ranks {
		for _, c := range []*Component{&p.Ranks[i].WeightBytes, &p.Ranks[i].AvailableKVBytes} {
			if c.Status == "" {
				*c = unknownComponent("not computed")
			}
			if c.Source == nil {
				c.Source = []string{}
			}
		}
	}
	if p.Status == PredictionUnknown {
		p.Fits = false
	}
	if p.Launch.CUDAGraphCaptureSizes == nil {
		// Resolved: the version's default list (vLLM trims it to the
		// batch limits at startup).
		p.Launch.CUDAGraphCaptureSizes = append([]int64{}, pl.f.Defaults.CaptureSizes...)
	}
	return p
}
