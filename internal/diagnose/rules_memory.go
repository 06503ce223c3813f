package diagnose

import (
	"fmt"
	"slices"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/units"
)

// Rules of the memory families. Byte figures from the log are taken at
// their pessimistic rounding edge (gibRounding).

// kvHold is how many tokens the reported KV memory holds, and how that
// was computed.
type kvHold struct {
	tokens int64
	basis  string
}

// bytesPerToken is the KV bytes one token costs on the worst rank and the
// block size: the calculator's (exact) when there is a model directory,
// else the log's own needed bytes over the max_model_len it failed at
// (their upper rounding edge).
func (c *ruleCtx) bytesPerToken() (per, blk int64, why string, ok bool) {
	if per, blk, ok := c.calc.kvBytesPerToken(); ok {
		return per, blk, fmt.Sprintf("%d B per token (calculator)", per), true
	}
	f := c.f
	if f.KVNeededBytes == nil || f.MaxModelLen == nil || *f.MaxModelLen <= 0 || *f.KVNeededBytes <= 0 {
		return 0, 0, "", false
	}
	per = ceilDiv(*f.KVNeededBytes+gibRounding, *f.MaxModelLen)
	return per, c.blockSize(), fmt.Sprintf("%d B per token (needed %s + rounding over %d tokens)", per, units.GiB(*f.KVNeededBytes), *f.MaxModelLen), true
}

// reportedHold computes the largest context the log's KV memory holds:
// the V0 token capacity when logged; else the available bytes (at their
// lower rounding edge) over the bytes per token, rounded down to a whole
// block. vLLM's own estimate caps it when logged, and so does the model's
// limit.
func (c *ruleCtx) reportedHold() (kvHold, bool) {
	var h kvHold
	f := c.f
	per, blk, why, perOK := c.bytesPerToken()
	switch {
	case f.KVCapacityTokens != nil && *f.KVCapacityTokens > 0:
		h = kvHold{*f.KVCapacityTokens, fmt.Sprintf("the log's KV cache holds %d tokens", *f.KVCapacityTokens)}
	case f.KVAvailableBytes != nil && perOK:
		avail := *f.KVAvailableBytes - gibRounding
		h = kvHold{floorTo(avail/per, blk), fmt.Sprintf("(available %s − rounding) / %s = %d, down to a multiple of block size %d",
			units.GiB(*f.KVAvailableBytes), why, avail/per, blk)}
	case f.EstimatedMaxModelLen != nil && *f.EstimatedMaxModelLen > 0:
		e := floorTo(*f.EstimatedMaxModelLen, c.blockSize())
		return kvHold{e, fmt.Sprintf("vLLM's own estimate from the available memory, %d, down to a multiple of block size %d", *f.EstimatedMaxModelLen, c.blockSize())}, e > 0
	default:
		return kvHold{}, false
	}
	if e := f.EstimatedMaxModelLen; e != nil && *e > 0 && *e < h.tokens {
		h = kvHold{floorTo(*e, c.blockSize()), fmt.Sprintf("%s; vLLM's own estimate %d is lower and is used", h.basis, *e)}
	}
	if d := c.derivedMaxLen(); d > 0 && h.tokens > d {
		h.tokens, h.basis = d, h.basis+fmt.Sprintf("; capped at the model's limit %d", d)
	}
	return h, h.tokens > 0
}

// derivedMaxLen is the model's own context limit: the log's, else the
// model config's (0 when neither is known).
func (c *ruleCtx) derivedMaxLen() int64 {
	if d := c.f.DerivedMaxModelLen; d != nil && *d > 0 {
		return *d
	}
	if c.calc != nil && c.calc.arch.MaxPosition > 0 {
		return c.calc.arch.MaxPosition
	}
	return 0
}

// kvNeed is the KV memory one request at max_model_len m needs and the
// memory the log reports available: the log's own figures when it failed
// at m (needed at its upper rounding edge, available at its lower), else
// bytes per token over whole blocks.
func (c *ruleCtx) kvNeed(m int64) (need, avail int64, why string, ok bool) {
	f := c.f
	if f.KVNeededBytes != nil && f.KVAvailableBytes != nil && f.MaxModelLen != nil && *f.MaxModelLen == m {
		return *f.KVNeededBytes + gibRounding, *f.KVAvailableBytes - gibRounding,
			fmt.Sprintf("needed %s − available %s + rounding", units.GiB(*f.KVNeededBytes), units.GiB(*f.KVAvailableBytes)), true
	}
	per, blk, perWhy, perOK := c.bytesPerToken()
	if !perOK || m <= 0 {
		return 0, 0, "", false
	}
	need = ceilDiv(m, blk) * blk * per
	switch {
	case f.KVAvailableBytes != nil:
		return need, *f.KVAvailableBytes - gibRounding, fmt.Sprintf("%d tokens × %s − available %s + rounding", m, perWhy, units.GiB(*f.KVAvailableBytes)), true
	case f.KVCapacityTokens != nil:
		return need, *f.KVCapacityTokens * per, fmt.Sprintf("(%d − %d cached tokens) × %s", m, *f.KVCapacityTokens, perWhy), true
	}
	return 0, 0, "", false
}

// raiseUtilization proposes the gpu_memory_utilization that adds deficit
// bytes to the KV budget (vLLM's budget grows one for one with the
// requested memory, since the non-KV memory does not change).
func (c *ruleCtx) raiseUtilization(deficit int64, why string, extra []TradeOff) bool {
	if deficit <= 0 {
		c.note(fmt.Sprintf("the reported KV memory already covers the need (%s): gpu_memory_utilization is not raised", why))
		return false
	}
	t := c.hw.TotalMemoryBytes
	if t <= 0 {
		c.need(NeedGPU, "gpu_total_memory", "raising gpu_memory_utilization is computed over the device's total memory: give --gpu")
		return false
	}
	u, src := c.utilization()
	nu := ceilRatio(u + float64(deficit)/float64(t))
	if nu > 1 {
		c.note(fmt.Sprintf("even gpu_memory_utilization 1.0 leaves the KV cache %s short (%s)", units.GiB(int64((nu-1)*float64(t))), why))
		return false
	}
	p := c.base.Clone()
	p.GPUMemoryUtilization = nu
	trade := append([]TradeOff{{TradeHeadroom, fmt.Sprintf("vLLM takes %s more of the %s device (%s → %s); co-located processes must fit in the remaining %s",
		units.GiB(int64((nu-u)*float64(t))), units.GiB(t), fmtRatio(u), fmtRatio(nu), units.GiB(int64((1-nu)*float64(t))))}}, extra...)
	if !c.ef.Accounting.SubtractsCUDAGraphEstimate && !p.EnforceEager {
		trade = append(trade, TradeOff{TradeHeadroom, fmt.Sprintf("%s captures CUDA graphs outside the budget: they must fit in the remaining %s", c.engineName(), units.GiB(int64((1-nu)*float64(t))))})
	}
	if nu > 0.95 {
		trade = append(trade, TradeOff{TradeHeadroom, "above 0.95 little is left for the CUDA context and allocator fragmentation"})
	}
	c.propose(p, []string{fmt.Sprintf("gpu_memory_utilization = ceil_0.01(%s %s + (%s = %s) / %s) = %s", src, fmtRatio(u), why, units.GiB(deficit), units.GiB(t), fmtRatio(nu))}, trade, nil, false)
	return true
}

// ruleKVTooSmall: the KV cache cannot hold one max_model_len request.
func ruleKVTooSmall(c *ruleCtx) {
	m := c.base.MaxModelLen
	if m <= 0 {
		c.need(NeedFact, "max_model_len", "the log does not state max_model_len and no --plan gives it")
		return
	}
	if h, ok := c.reportedHold(); !ok {
		c.need(NeedFact, "kv_available_bytes", "the largest max_model_len the KV cache holds needs the available KV memory and its bytes per token (the log's needed KV, or the calculator with a model directory)")
	} else if h.tokens >= m {
		c.note(fmt.Sprintf("the log's figures say the KV cache holds %d ≥ %d tokens; they do not explain the failure, so max_model_len is not lowered", h.tokens, m))
	} else {
		p := c.base.Clone()
		p.MaxModelLen = h.tokens
		c.propose(p, []string{"max_model_len = " + h.basis},
			[]TradeOff{{TradeContext, fmt.Sprintf("requests longer than %d tokens are refused (was %d)", h.tokens, m)},
				{TradeKVCapacity, "one request at the new max_model_len fills the cache: concurrency at full length is about 1x"}}, nil, false)
	}
	if need, avail, why, ok := c.kvNeed(m); ok {
		c.raiseUtilization(need-avail, why, nil)
		if need > avail {
			c.fp8KV(need, avail, why)
		}
	} else {
		c.need(NeedFact, "kv_needed_bytes", "the utilization that holds max_model_len needs the needed and available KV memory (or the calculator with a model directory)")
	}
}

// fp8KV proposes an fp8 KV cache when halving the KV element alone makes
// one max_model_len request fit the reported memory.
func (c *ruleCtx) fp8KV(need, avail int64, why string) {
	if c.base.KVCacheDType != plan.KVCacheUnset && c.base.KVCacheDType != plan.KVCacheAuto {
		return
	}
	if !c.twoByteKV() {
		c.need(NeedModelDir, "kv_cache_element_bytes", "an fp8 KV cache halves 2-byte KV elements; the model's KV element size is not known (give the model directory or --dtype)")
		return
	}
	if ceilDiv(need, 2) > avail {
		return
	}
	p := c.base.Clone()
	p.KVCacheDType = plan.KVCacheFP8
	var unchecked []Need
	if c.cc == nil || c.cc.Less(ComputeCapability{8, 9}) {
		unchecked = append(unchecked, Need{NeedGPU, "compute_capability", "fp8 KV kernels need an attention backend that supports them on this GPU (native on compute capability 8.9+)"})
	}
	c.propose(p, []string{fmt.Sprintf("kv_cache_dtype fp8: half of the needed %s ≤ the available %s (%s)", units.GiB(need), units.GiB(avail), why)},
		[]TradeOff{{TradeNumerics, "KV stored in 8-bit floating point: small accuracy loss, model dependent"},
			{TradeFleetWide, "kv_cache_dtype is a NIXL compatibility factor: every prefill and decode engine must change together"}}, unchecked, false)
}

// twoByteKV reports whether the KV cache's element is 2 bytes (the model
// dtype under kv_cache_dtype auto).
func (c *ruleCtx) twoByteKV() bool {
	if c.calc != nil && c.calc.base.KVCacheDTypeBytes > 0 {
		return c.calc.base.KVCacheDTypeBytes == 2
	}
	return c.base.DType == plan.DTypeHalf || c.base.DType == plan.DTypeBFloat16
}

// ruleNoKVMemory: no memory left for cache blocks (a negative budget).
func ruleNoKVMemory(c *ruleCtx) {
	avail, src, ok := c.reportedBudget()
	if !ok {
		c.need(NeedFact, "kv_available_bytes", "the log does not state the KV budget (\"Available KV cache memory\") and there is no model directory to predict it")
		return
	}
	m := c.base.MaxModelLen
	if m <= 0 {
		m = c.derivedMaxLen()
	}
	per, blk, perOK := c.calc.kvBytesPerToken()
	var need int64
	if perOK && m > 0 {
		need = ceilDiv(m, blk) * blk * per
		c.raiseUtilization(need-avail+gibRounding, fmt.Sprintf("one %d-token request × %d B (calculator) − %s budget %s + rounding", m, per, src, units.GiB(avail)), nil)
	} else {
		c.need(NeedModelDir, "kv_bytes_per_token", fmt.Sprintf("the budget is %s; making it hold one max_model_len request needs the model's KV bytes per token (give the model directory)", units.GiB(avail)))
	}
	c.eagerForBudget(avail, need)
	c.shrinkBatch(avail, need)
}

// reportedBudget is the log's KV budget, else the calculator's prediction.
func (c *ruleCtx) reportedBudget() (int64, string, bool) {
	if a := c.f.KVAvailableBytes; a != nil {
		return *a, "the log's", true
	}
	if c.calc != nil && c.calc.ok {
		c.note("the log does not state the KV budget; the calculator's predicted budget is used")
		return c.calc.base.AvailableKVBytes.Bytes, "the predicted", true
	}
	return 0, "", false
}

// eagerForBudget: on versions that subtract the CUDA-graph estimate from
// the KV budget, --enforce-eager returns it to the cache.
func (c *ruleCtx) eagerForBudget(avail, need int64) {
	if c.base.EnforceEager {
		return
	}
	if !c.ef.Accounting.SubtractsCUDAGraphEstimate {
		c.note(c.engineName() + " does not subtract CUDA-graph memory from the KV budget, so --enforce-eager would not enlarge it")
		return
	}
	g := c.graphEstimate()
	if g <= 0 {
		c.need(NeedFact, "cuda_graph_bytes", "--enforce-eager returns the CUDA-graph estimate to the KV budget; the log does not state the estimate")
		return
	}
	after := avail + g - 2*gibRounding
	var unchecked []Need
	switch {
	case need > 0 && after < need:
		return
	case after <= 0:
		return
	case need == 0:
		unchecked = append(unchecked, Need{NeedModelDir, "kv_bytes_per_token", "whether the larger budget holds one max_model_len request needs the model's KV bytes per token"})
	}
	p := c.base.Clone()
	p.EnforceEager = true
	c.propose(p, []string{fmt.Sprintf("enforce_eager: budget %s + CUDA-graph estimate %s − rounding = %s", units.GiB(avail), units.GiB(g), units.GiB(after))},
		[]TradeOff{{TradeLatency, "no CUDA graphs: decode steps run eagerly, typically slower per token at small batches"}}, unchecked, false)
}

// graphEstimate is the log's CUDA-graph figure, else the calculator's.
func (c *ruleCtx) graphEstimate() int64 {
	if g := c.f.CUDAGraphBytes; g != nil && *g > 0 {
		return *g
	}
	if c.calc != nil && c.calc.ok && c.calc.base.CUDAGraphEstimate.Known() {
		return c.calc.base.CUDAGraphEstimate.Bytes
	}
	return 0
}

// shrinkBatch lowers max_num_batched_tokens, then max_num_seqs, to the
// largest value whose predicted activation saving closes the gap: the
// calculator's predicted change of the budget is added to the reported
// budget.
func (c *ruleCtx) shrinkBatch(avail, need int64) {
	if c.calc == nil || !c.calc.ok {
		c.need(NeedModelDir, "activation_peak", "how much a smaller max_num_batched_tokens or max_num_seqs saves is predicted by the calculator (give the model directory)")
		return
	}
	target := max(need, 1) + gibRounding
	base := c.calc.base
	l := base.Launch
	for _, knob := range []struct {
		field string
		cur   int64
		floor int64
		set   func(*plan.Plan, int64)
		trade TradeOff
	}{
		{"max_num_batched_tokens", l.MaxNumBatchedTokens, 512, func(p *plan.Plan, v int64) { p.MaxNumBatchedTokens = v },
			TradeOff{TradeLatency, "smaller prefill chunks: long prompts take more steps (TTFT rises)"}},
		{"max_num_seqs", l.MaxNumSeqs, 1, func(p *plan.Plan, v int64) { p.MaxNumSeqs = v },
			TradeOff{TradeThroughput, "fewer sequences decode together: lower throughput at high load"}},
	} {
		for v := knob.cur / 2; v >= knob.floor; v /= 2 {
			p := c.base.Clone()
			knob.set(&p, v)
			pr, ok := c.calc.known(p)
			if !ok {
				break
			}
			gain := pr.AvailableKVBytes.Bytes - base.AvailableKVBytes.Bytes
			if avail+gain >= target {
				c.propose(p, []string{fmt.Sprintf("%s = %d: the calculator predicts the budget %s larger than at %d; reported %s + that ≥ %s needed",
					knob.field, v, units.GiB(gain), knob.cur, units.GiB(avail), units.GiB(target))}, []TradeOff{knob.trade}, nil, false)
				break
			}
		}
	}
}

// ruleStartupFreeMemory: free memory at start-up is below the requested
// fraction; the largest utilization the free memory covers is computed.
func ruleStartupFreeMemory(c *ruleCtx) {
	f := c.f
	t := c.hw.TotalMemoryBytes
	if f.FreeMemoryBytes == nil || t <= 0 {
		c.need(NeedFact, "free_memory_bytes", "the utilization that fits needs the free and total device memory the log states at start-up")
		return
	}
	free := *f.FreeMemoryBytes - gibRounding
	nu := floorRatio(float64(free) / float64(t))
	u, src := c.utilization()
	c.action(ActionFreeGPU, fmt.Sprintf("another process holds %s of the device: stopping it lets the plan start unchanged", units.GiB(t-*f.FreeMemoryBytes)))
	if nu <= 0 || nu >= u {
		c.note(fmt.Sprintf("free memory %s of %s gives no utilization below %s %s", units.GiB(*f.FreeMemoryBytes), units.GiB(t), src, fmtRatio(u)))
		return
	}
	p := c.base.Clone()
	p.GPUMemoryUtilization = nu
	basis := []string{fmt.Sprintf("gpu_memory_utilization = floor_0.01((free %s − rounding) / total %s) = %s", units.GiB(*f.FreeMemoryBytes), units.GiB(t), fmtRatio(nu))}
	trade := []TradeOff{{TradeKVCapacity, fmt.Sprintf("the KV budget shrinks by about %s (%s → %s)", units.GiB(int64((u-nu)*float64(t))), fmtRatio(u), fmtRatio(nu))}}
	if c.calc == nil || !c.calc.ok {
		c.propose(p, basis, trade, []Need{{NeedModelDir, "kv_fit", "whether the smaller KV budget still holds max_model_len is predicted by the calculator (give the model directory)"}}, false)
		return
	}
	pr, ok := c.calc.known(p)
	switch {
	case !ok:
		c.propose(p, basis, trade, []Need{{NeedModelDir, "kv_fit", "the calculator could not predict the smaller budget"}}, false)
	case pr.Fits:
		c.propose(p, append(basis, c.calc.describe(pr)), trade, nil, false)
	case pr.MaxFeasibleModelLen > 0:
		q := p.Clone()
		q.MaxModelLen = floorTo(pr.MaxFeasibleModelLen, max(1, pr.BlockSize))
		c.propose(q, append(basis, fmt.Sprintf("max_model_len = %d: the longest context the predicted budget holds (%s)", q.MaxModelLen, c.calc.describe(pr))),
			append(trade, TradeOff{TradeContext, fmt.Sprintf("requests longer than %d tokens are refused", q.MaxModelLen)}), nil, false)
	default:
		c.note(fmt.Sprintf("at gpu_memory_utilization %s the calculator predicts no KV memory at all", fmtRatio(nu)))
	}
}

// ruleMaxModelLen: max_model_len above the model's derived limit.
func ruleMaxModelLen(c *ruleCtx) {
	d := c.derivedMaxLen()
	if d <= 0 {
		c.need(NeedFact, "derived_max_model_len", "the model's own limit is not in the log and there is no model directory")
		return
	}
	p := c.base.Clone()
	p.MaxModelLen = d
	c.propose(p, []string{fmt.Sprintf("max_model_len = the model's derived limit %d", d)},
		[]TradeOff{{TradeContext, fmt.Sprintf("requests longer than %d tokens are refused; going beyond the trained positions (VLLM_ALLOW_LONG_MAX_MODEL_LEN) is not proposed: outputs past it are unreliable", d)}}, nil, false)
}

// ruleGraphCaptureOOM: CUDA out of memory while capturing CUDA graphs.
func ruleGraphCaptureOOM(c *ruleCtx) {
	if c.base.EnforceEager {
		c.note("the plan already sets enforce_eager; a graph-capture OOM with it is not explained by the plan")
		return
	}
	p := c.base.Clone()
	p.EnforceEager = true
	c.propose(p, []string{"enforce_eager: no graphs are captured, so capture memory is not needed"},
		[]TradeOff{{TradeLatency, "no CUDA graphs: decode steps run eagerly, typically slower per token at small batches"}}, nil, false)
	c.smallerCapture()
	c.lowerUtilizationForGraphs()
}

// smallerCapture halves the largest capture size (within the version's
// default list): graphs for larger batches are not captured.
func (c *ruleCtx) smallerCapture() {
	sizes := c.base.CUDAGraphCaptureSizes
	if sizes == nil {
		sizes = c.ef.Defaults.CaptureSizes
	}
	cur := c.base.MaxCUDAGraphCapture
	if cur == 0 && len(sizes) > 0 {
		cur = sizes[len(sizes)-1]
	}
	if s := c.base.MaxNumSeqs; s > 0 && s < cur {
		cur = s // vLLM does not capture batches above max_num_seqs
	}
	var kept []int64
	for _, s := range sizes {
		if s <= cur/2 {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		return
	}
	p := c.base.Clone()
	p.CUDAGraphCaptureSizes, p.MaxCUDAGraphCapture = slices.Clone(kept), 0
	c.propose(p, []string{fmt.Sprintf("cudagraph_capture_sizes: the %s sizes up to half the largest captured batch (%d → %d)", c.sizesSource(), cur, kept[len(kept)-1])},
		[]TradeOff{{TradeLatency, fmt.Sprintf("batches above %d decode without CUDA graphs", kept[len(kept)-1])},
			{TradeUnpredicted, "the graph memory saved is not predicted (the calculator is calibrated on the default sizes only)"}}, nil, false)
}

func (c *ruleCtx) sizesSource() string {
	if c.base.CUDAGraphCaptureSizes != nil {
		return "plan's"
	}
	return c.engineName() + " default"
}

// lowerUtilizationForGraphs lowers gpu_memory_utilization by what the
// failed allocation lacked: the KV cache is allocated before graphs are
// captured, so a smaller budget leaves that memory free for capture.
func (c *ruleCtx) lowerUtilizationForGraphs() {
	f := c.f
	t := c.hw.TotalMemoryBytes
	if f.TriedToAllocateBytes == nil || f.FreeMemoryBytes == nil || t <= 0 {
		c.need(NeedFact, "tried_to_allocate_bytes", "the utilization that leaves room for capture needs the failed allocation, the free memory and the device total from the OOM message")
		return
	}
	short := *f.TriedToAllocateBytes - *f.FreeMemoryBytes + 2*gibRounding
	u, src := c.utilization()
	nu := floorRatio(u - float64(short)/float64(t))
	if short <= 0 || nu <= 0 {
		return
	}
	p := c.base.Clone()
	p.GPUMemoryUtilization = nu
	trade := []TradeOff{{TradeKVCapacity, fmt.Sprintf("the KV budget shrinks by about %s (%s → %s)", units.GiB(int64((u-nu)*float64(t))), fmtRatio(u), fmtRatio(nu))}}
	unchecked := c.fitUnchecked(p)
	c.propose(p, []string{fmt.Sprintf("gpu_memory_utilization = floor_0.01(%s %s − (tried %s − free %s + rounding) / %s) = %s", src, fmtRatio(u),
		units.GiB(*f.TriedToAllocateBytes), units.GiB(*f.FreeMemoryBytes), units.GiB(t), fmtRatio(nu))}, trade, unchecked, false)
}

// fitUnchecked: with the calculator, a plan whose KV cache is predicted
// not to hold max_model_len is flagged; without it, the fit is unchecked.
func (c *ruleCtx) fitUnchecked(p plan.Plan) []Need {
	if c.calc == nil {
		return []Need{{NeedModelDir, "kv_fit", "whether the KV cache still holds max_model_len is predicted by the calculator (give the model directory)"}}
	}
	if pr, ok := c.calc.known(p); ok && !pr.Fits {
		return []Need{{NeedModelDir, "kv_fit", fmt.Sprintf("the calculator predicts the KV cache no longer holds max_model_len (longest: %d)", pr.MaxFeasibleModelLen)}}
	}
	return nil
}

// ceilDiv is ⌈a/b⌉ for b > 0 (0 otherwise).
func ceilDiv(a, b int64) int64 {
	switch {
	case b <= 0:
		return 0
	case a <= 0:
		return a / b // truncation is the ceiling for a non-positive quotient
	}
	return (a-1)/b + 1
}
