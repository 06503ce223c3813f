package diagnose

import (
	"fmt"
	"slices"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
)

// TradeOffKind is what a correction gives up. The kinds carry the weight
// corrections are ranked by (cheapest first) after the requirements they
// violate.
type TradeOffKind string

// Trade-off kinds, from cheapest to dearest.
const (
	TradeHeadroom      TradeOffKind = "less_gpu_headroom"  // takes more of the device; co-located processes and graphs get less
	TradeKVCapacity    TradeOffKind = "less_kv_capacity"   // fewer tokens cached: less concurrency at long contexts
	TradeThroughput    TradeOffKind = "lower_throughput"   // smaller batches or chunks
	TradeContext       TradeOffKind = "shorter_context"    // requests longer than max_model_len are refused
	TradeLatency       TradeOffKind = "higher_latency"     // slower decode or prefill: the SLO is at risk
	TradeNumerics      TradeOffKind = "numerics"           // a different dtype or KV precision: outputs may change
	TradeFleetWide     TradeOffKind = "fleet_wide_change"  // a NIXL compatibility factor: every engine must change together
	TradeMoreGPUs      TradeOffKind = "more_gpus"          // a larger topology
	TradeArtifact      TradeOffKind = "different_artifact" // needs another checkpoint
	TradeUnpredicted   TradeOffKind = "effect_unpredicted" // the calculator cannot predict the saving; the proof will tell
	tradeWeightUnknown              = 10
)

var tradeWeights = map[TradeOffKind]int{
	TradeHeadroom: 1, TradeKVCapacity: 2, TradeThroughput: 3, TradeContext: 4, TradeUnpredicted: 4, TradeLatency: 5,
	TradeNumerics: 6, TradeFleetWide: 7, TradeMoreGPUs: 8, TradeArtifact: 9,
}

// TradeOff is one cost of a correction, in words the rule wrote from
// typed values.
type TradeOff struct {
	Kind TradeOffKind `json:"kind"`
	Text string       `json:"text"`
}

// Requirement names one accepted fleet requirement a correction can
// violate or put at risk.
type Requirement string

// Requirements a correction is checked against.
const (
	ReqMaxModelLen    Requirement = "max_model_len"                  // the context the fleet needs
	ReqSLO            Requirement = "slo"                            // slo.ttft_s / slo.tpot_s
	ReqArtifact       Requirement = "artifact"                       // the fleet's model: the pinned artifact
	ReqTensorParallel Requirement = "hardware.tensor_parallel"       // the fleet's engine shape
	ReqModelDType     Requirement = "engine_contract.model_dtype"    // a NIXL compatibility factor
	ReqKVCacheDType   Requirement = "engine_contract.kv_cache_dtype" // a NIXL compatibility factor
)

// Violation is a requirement a correction does not meet.
type Violation struct {
	Requirement Requirement `json:"requirement"`
	Text        string      `json:"text"`
}

// Correction is one corrected plan a rule computed.
type Correction struct {
	Plan    plan.Plan     `json:"plan"`
	Changes []plan.Change `json:"changes"` // against Remedy.Base, sorted by path
	// Basis says how each changed value was computed, from which typed
	// facts.
	Basis      []string    `json:"basis"`
	TradeOffs  []TradeOff  `json:"trade_offs"`
	Violations []Violation `json:"violations"`
	// Risks are requirements the correction may affect that only a
	// serving trial can evaluate (the SLO when latency changes).
	Risks []Requirement `json:"risks"`
	// Unchecked are checks the rule could not run (a fit without the
	// calculator); the correction stands, the proof decides.
	Unchecked        []Need `json:"unchecked"`
	RequiresArtifact bool   `json:"requires_artifact"`
	Cost             int    `json:"cost"`
}

// cost orders corrections: each violated requirement outweighs every
// trade-off, then risks, then the trade-offs' weights.
func (c Correction) cost() int {
	n := 1000*len(c.Violations) + 100*len(c.Risks)
	for _, t := range c.TradeOffs {
		w, ok := tradeWeights[t.Kind]
		if !ok {
			w = tradeWeightUnknown
		}
		n += w
	}
	return n
}

// violations checks a corrected plan against the accepted requirements.
func (c *ruleCtx) violations(p plan.Plan, artifact bool) ([]Violation, []Requirement) {
	req := c.in.Requirements
	v := []Violation{}
	if need := req.MaxModelLen; need > 0 && p.MaxModelLen > 0 && p.MaxModelLen < need {
		v = append(v, Violation{ReqMaxModelLen, fmt.Sprintf("max_model_len %d is below the %d tokens the fleet needs", p.MaxModelLen, need)})
	}
	if artifact && req.ArtifactPinned {
		v = append(v, Violation{ReqArtifact, "needs a different checkpoint than the fleet's model"})
	}
	if t := req.TensorParallel; t > 0 && p.TensorParallelSize > 0 && p.TensorParallelSize != t {
		v = append(v, Violation{ReqTensorParallel, fmt.Sprintf("tensor_parallel_size %d differs from the fleet's hardware.tensor_parallel %d", p.TensorParallelSize, t)})
	}
	if k := req.Contract; k != nil {
		if k.ModelDType != plan.DTypeUnset && p.DType != plan.DTypeUnset && !sameDType(p.DType, k.ModelDType) {
			v = append(v, Violation{ReqModelDType, fmt.Sprintf("dtype %s differs from the contract's model_dtype %s: engines would stop pairing over NIXL", p.DType, k.ModelDType)})
		}
		if k.KVCacheDType != plan.KVCacheUnset && p.KVCacheDType != plan.KVCacheUnset && !sameKV(p.KVCacheDType, k.KVCacheDType) {
			v = append(v, Violation{ReqKVCacheDType, fmt.Sprintf("kv_cache_dtype %s differs from the contract's %s: engines would stop pairing over NIXL", p.KVCacheDType, k.KVCacheDType)})
		}
	}
	return v, c.risks(p)
}

// risks: latency changes put the SLO at risk when the fleet states one.
func (c *ruleCtx) risks(p plan.Plan) []Requirement {
	if c.in.Requirements.SLO == nil {
		return []Requirement{}
	}
	for _, ch := range plan.Diff(c.base, p) {
		if latencyField(ch.Field) {
			return []Requirement{ReqSLO}
		}
	}
	return []Requirement{}
}

// latencyField reports whether changing f can change per-request latency.
// max_model_len, gpu_memory_utilization and the port size memory or name
// the socket; they do not change the work per token.
func latencyField(f plan.Field) bool {
	switch f {
	case plan.FieldMaxModelLen, plan.FieldGPUMemoryUtilization, plan.FieldPort:
		return false
	}
	return true
}

// sameDType: auto resolves to the checkpoint's dtype, which the plan
// does not know, so auto is never counted as a difference.
func sameDType(a, b plan.DType) bool { return a == b || a == plan.DTypeAuto || b == plan.DTypeAuto }

// sameKV: fp8 is vLLM's spelling of fp8_e4m3 on CUDA.
func sameKV(a, b plan.KVCacheDType) bool {
	norm := func(k plan.KVCacheDType) plan.KVCacheDType {
		if k == plan.KVCacheFP8E4M3 {
			return plan.KVCacheFP8
		}
		return k
	}
	return norm(a) == norm(b)
}

// rank sorts corrections by cost, keeping the rule's order for ties, and
// drops a correction whose plan another cheaper one already proposes.
func rank(cs []Correction) []Correction {
	for i := range cs {
		cs[i].Cost = cs[i].cost()
	}
	slices.SortStableFunc(cs, func(a, b Correction) int { return a.Cost - b.Cost })
	out := []Correction{}
	for _, c := range cs {
		dup := slices.ContainsFunc(out, func(o Correction) bool {
			return len(plan.Diff(o.Plan, c.Plan)) == 0 && o.RequiresArtifact == c.RequiresArtifact
		})
		if !dup {
			out = append(out, c)
		}
	}
	return out
}
