// Package profile is the narwhal.profiles v1 store (runtime.md §2.2): the
// per-engine cost curves that placement, admission, the controller, the
// simulator and simengine all price work with. Loading is strict because a
// silently defaulted curve mis-prices every request on that engine.
package profile

import (
	"math"
)

// Schema and SchemaVersion identify the store document.
const (
	Schema        = "narwhal.profiles"
	SchemaVersion = 1
)

// Store is the whole document.
type Store struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	Profiles      []Row  `json:"profiles"`
}

// Row is one engine's fitted profile. Optional fields are pointers so a
// saved store keeps absent fields absent.
type Row struct {
	IID              string  `json:"iid"`
	GenerationDigest *string `json:"generation_digest,omitempty"`

	TTFTA           float64  `json:"ttft_a"`
	TTFTB           float64  `json:"ttft_b"`
	TTFTC           float64  `json:"ttft_c"`
	TTFTBlockTokens *int     `json:"ttft_block_tokens,omitempty"`
	TTFTSplit       *float64 `json:"ttft_split,omitempty"`

	CachedTTFTA           *float64 `json:"cached_ttft_a,omitempty"`
	CachedTTFTB           *float64 `json:"cached_ttft_b,omitempty"`
	CachedTTFTC           *float64 `json:"cached_ttft_c,omitempty"`
	CachedTTFTD           *float64 `json:"cached_ttft_d,omitempty"`
	CachedCVMAPE          *float64 `json:"cached_cv_mape,omitempty"`
	CachedMinPrefixTokens *int     `json:"cached_min_prefix_tokens,omitempty"`
	CachedMaxPrefixTokens *int     `json:"cached_max_prefix_tokens,omitempty"`
	CachedMinSuffixTokens *int     `json:"cached_min_suffix_tokens,omitempty"`
	CachedMaxSuffixTokens *int     `json:"cached_max_suffix_tokens,omitempty"`

	TPOTSlope        float64  `json:"tpot_slope"`
	TPOTIntercept    float64  `json:"tpot_intercept"`
	TPOTRequestSlope *float64 `json:"tpot_request_slope,omitempty"`

	DecodeMinRequests *int `json:"decode_min_requests,omitempty"`
	DecodeMaxRequests *int `json:"decode_max_requests,omitempty"`
	DecodeMinKVTokens *int `json:"decode_min_kv_tokens,omitempty"`
	DecodeMaxKVTokens *int `json:"decode_max_kv_tokens,omitempty"`
	KVCapacityTokens  *int `json:"kv_capacity_tokens,omitempty"`

	DecodeFitMAPE *float64 `json:"decode_fit_mape,omitempty"`
	DecodeCVMAPE  *float64 `json:"decode_cv_mape,omitempty"`

	PrefillMinTokens      *int `json:"prefill_min_tokens,omitempty"`
	PrefillMaxTokens      *int `json:"prefill_max_tokens,omitempty"`
	DecodeMinOutputTokens *int `json:"decode_min_output_tokens,omitempty"`
	DecodeMaxOutputTokens *int `json:"decode_max_output_tokens,omitempty"`

	ColocatedGroup          *string  `json:"colocated_group,omitempty"`
	ColocatedTargetRole     *string  `json:"colocated_target_role,omitempty"`
	ColocatedPrefillEngines *int     `json:"colocated_prefill_engines,omitempty"`
	ColocatedDecodeEngines  *int     `json:"colocated_decode_engines,omitempty"`
	ColocatedPrefillRPS     *float64 `json:"colocated_prefill_rps,omitempty"`
	ColocatedDecodeRPS      *float64 `json:"colocated_decode_rps,omitempty"`
}

// Get returns the first row for iid.
func (s *Store) Get(iid string) (Row, bool) {
	for _, r := range s.Profiles {
		if r.IID == iid {
			return r, true
		}
	}
	return Row{}, false
}

func intOr(p *int, d int) int {
	if p == nil {
		return d
	}
	return *p
}

func floatOr(p *float64, d float64) float64 {
	if p == nil {
		return d
	}
	return *p
}

// splitStep is the extra cost a prompt pays when it ends in a partial
// block, for engines whose TTFT curve is a staircase.
func (r *Row) splitStep(n int) float64 {
	if r.TTFTBlockTokens == nil || r.TTFTSplit == nil || *r.TTFTBlockTokens <= 0 {
		return 0
	}
	b := *r.TTFTBlockTokens
	if n > b && n%b != 0 {
		return *r.TTFTSplit
	}
	return 0
}

// PrefillTime is prefill_time(n) in seconds. Prompts shorter than the
// sweep are priced at its shortest length; longer ones extend the fit.
func (r Row) PrefillTime(n int) float64 {
	m := max(n, intOr(r.PrefillMinTokens, 0))
	x := float64(m)
	return max(0, r.TTFTA*x*x+r.TTFTB*x+r.TTFTC+r.splitStep(m))
}

// HasCachedFit reports whether the warm-prefill fit is present.
func (r Row) HasCachedFit() bool {
	return r.CachedTTFTA != nil && r.CachedTTFTB != nil && r.CachedTTFTC != nil && r.CachedTTFTD != nil &&
		r.CachedMinPrefixTokens != nil && r.CachedMaxPrefixTokens != nil &&
		r.CachedMinSuffixTokens != nil && r.CachedMaxSuffixTokens != nil
}

// CachedPrefillTime is cached_prefill_time(P, S) for P cached and S
// uncached tokens; ok is false where the warm fit does not cover (P, S).
func (r Row) CachedPrefillTime(p, s int) (float64, bool) {
	if p <= 0 {
		return r.PrefillTime(s), true
	}
	if !r.HasCachedFit() || p < *r.CachedMinPrefixTokens || p > *r.CachedMaxPrefixTokens ||
		s < *r.CachedMinSuffixTokens || s > *r.CachedMaxSuffixTokens {
		return 0, false
	}
	P, S := float64(p), float64(s)
	v := *r.CachedTTFTA*(2*P*S+S*S) + *r.CachedTTFTB*S + *r.CachedTTFTD*P + *r.CachedTTFTC + r.splitStep(s)
	return max(0, v), true
}

// TokenInterval is token_interval(tokens, requests) in seconds: the decode
// step time with that many resident KV tokens and running requests.
func (r Row) TokenInterval(tokens, requests int) float64 {
	return tokenInterval(r.TPOTSlope, floatOr(r.TPOTRequestSlope, 0), r.TPOTIntercept, tokens, requests)
}

// DecodeFit is a row's token_interval fit with its optional request slope
// resolved: all a decode step's price reads, small enough to hold by
// value (a Row in an interface is copied whole per value-method call).
type DecodeFit struct{ slope, requestSlope, intercept float64 }

// DecodeFit is r's token_interval fit.
func (r *Row) DecodeFit() DecodeFit {
	return DecodeFit{r.TPOTSlope, floatOr(r.TPOTRequestSlope, 0), r.TPOTIntercept}
}

// TokenInterval is Row.TokenInterval of the row the fit is from.
func (f DecodeFit) TokenInterval(tokens, requests int) float64 {
	return tokenInterval(f.slope, f.requestSlope, f.intercept, tokens, requests)
}

// tokenInterval is token_interval from the fit's three coefficients: one
// expression, so that every caller rounds alike. The built-in max answers
// what math.Max does (NaN, ±0 and ±Inf alike) inline, without its call.
func tokenInterval(slope, requestSlope, intercept float64, tokens, requests int) float64 {
	return max(0, slope*float64(tokens)+requestSlope*float64(requests)+intercept)
}

// MT is Arrow's MT(budget, requests): the largest resident-KV batch that
// still meets the per-token budget (seconds). +Inf means unbounded.
func (r *Row) MT(budget float64, requests int) float64 {
	if r.DecodeMaxRequests != nil && requests > *r.DecodeMaxRequests {
		return 0
	}
	fixed := r.TPOTIntercept + floatOr(r.TPOTRequestSlope, 0)*float64(requests)
	if fixed > budget {
		return 0
	}
	v := math.Inf(1)
	if r.TPOTSlope > 0 {
		v = max(0, (budget-fixed)/r.TPOTSlope)
	}
	if r.DecodeMaxKVTokens != nil {
		v = min(v, float64(*r.DecodeMaxKVTokens))
	}
	return v
}

// DecodeTokenLimit is min(kv_capacity_tokens, decode_max_kv_tokens) over
// those set; ok is false when neither is.
func (r *Row) DecodeTokenLimit() (int, bool) {
	switch {
	case r.KVCapacityTokens != nil && r.DecodeMaxKVTokens != nil:
		return min(*r.KVCapacityTokens, *r.DecodeMaxKVTokens), true
	case r.KVCapacityTokens != nil:
		return *r.KVCapacityTokens, true
	case r.DecodeMaxKVTokens != nil:
		return *r.DecodeMaxKVTokens, true
	}
	return 0, false
}

// DecodeRequestLimit is decode_request_limit(context).
func (r *Row) DecodeRequestLimit(context int) int {
	if context <= 0 || r.DecodeMaxRequests == nil {
		return 0
	}
	hi := *r.DecodeMaxRequests
	if lim, ok := r.DecodeTokenLimit(); ok {
		hi = min(hi, max(1, lim/context))
	}
	return max(1, hi)
}

// CoversDecode reports whether (requests, tokens) lies in the measured
// decode domain; an unset bound passes.
func (r *Row) CoversDecode(requests, tokens int) bool {
	return (r.DecodeMaxRequests == nil || requests <= *r.DecodeMaxRequests) &&
		(r.DecodeMaxKVTokens == nil || tokens <= *r.DecodeMaxKVTokens)
}

// CoversOutput reports whether out output tokens were measured.
func (r *Row) CoversOutput(out int) bool {
	return r.DecodeMinOutputTokens == nil || out >= *r.DecodeMinOutputTokens
}

// CoversPrefill reports whether an n-token prompt was measured.
func (r *Row) CoversPrefill(n int) bool {
	return r.PrefillMaxTokens == nil || n <= *r.PrefillMaxTokens
}

// DecodeRPS is one decode engine's request throughput at this shape
// (runtime.md §2.2, decode_rps).
func (r *Row) DecodeRPS(tpotSLO float64, context, output int, correction float64) float64 {
	s := r.DecodeShape(context, output)
	return s.RPS(tpotSLO, correction)
}

// DecodeShape is the part of decode_rps that depends on the shape and the
// row alone, for a caller that prices one shape at several corrections:
// the row's decode fields are read once, here.
type DecodeShape struct {
	context, output int
	hi              int     // decode_request_limit(context); 0: no throughput
	inc             float64 // token interval per request added at this context
	// The row's decode fit and domain, optional fields resolved.
	slope, requestSlope, intercept float64
	maxRequests, maxKV             int // math.MaxInt: unbounded
	minKV, minRequests             int
}

// DecodeShape prepares decode_rps at (context, output) for RPS.
func (r *Row) DecodeShape(context, output int) DecodeShape {
	s := DecodeShape{context: context, output: output}
	if context <= 0 || output <= 0 || !r.CoversOutput(output) {
		return s
	}
	s.hi = r.DecodeRequestLimit(context)
	s.requestSlope = floatOr(r.TPOTRequestSlope, 0)
	s.inc = s.requestSlope + r.TPOTSlope*float64(context)
	s.slope, s.intercept = r.TPOTSlope, r.TPOTIntercept
	s.maxRequests, s.maxKV = intOr(r.DecodeMaxRequests, math.MaxInt), intOr(r.DecodeMaxKVTokens, math.MaxInt)
	s.minKV, s.minRequests = intOr(r.DecodeMinKVTokens, 0), intOr(r.DecodeMinRequests, 1)
	return s
}

// RPS is decode_rps of the prepared shape at the TPOT target and the
// engine's decode correction: the same arithmetic as DecodeRPS.
func (s *DecodeShape) RPS(tpotSLO, correction float64) float64 {
	if s.hi <= 0 || correction <= 0 {
		return 0
	}
	return s.RPSWithin(tpotSLO, correction, tpotSLO/correction)
}

// RPSWithin is RPS for a caller that has divided the TPOT target by the
// correction already (budget = tpotSLO / correction).
func (s *DecodeShape) RPSWithin(tpotSLO, correction, budget float64) float64 {
	var rps [1]float64
	s.RPSEach(tpotSLO, []float64{correction}, []float64{budget}, rps[:])
	return rps[0]
}

// RPSEach is RPSWithin at each of corrections with its budget (budgets[k]
// = tpotSLO / corrections[k]), written to rps[k]: one call prices a
// shape for a fleet's engines, the shape's fields read once.
func (s *DecodeShape) RPSEach(tpotSLO float64, corrections, budgets, rps []float64) {
	hi, inc, context, minKV, minRequests := s.hi, s.inc, s.context, s.minKV, s.minRequests
	slope, requestSlope, intercept := s.slope, s.requestSlope, s.intercept
	maxRequests, maxKV, output := s.maxRequests, s.maxKV, float64(s.output)
	budgets, rps = budgets[:len(corrections)], rps[:len(corrections)]
	for k, correction := range corrections {
		v := 0.0
		if hi > 0 && !(correction <= 0) {
			b := hi
			if inc > 0 {
				// decode_rps floors the batch here; the conversion's
				// truncation is the floor wherever b can pass b ≥ 1 below
				// (a negative quotient fails it either way).
				b = min(hi, int((budgets[k]-intercept)/inc))
			}
			// CoversDecode(b, b*context) on the row's bounds.
			if b >= 1 && b <= maxRequests && b*context <= maxKV {
				interval := tokenInterval(slope, requestSlope, intercept, max(b*context, minKV), max(b, minRequests)) * correction
				if !(interval <= 0 || interval > tpotSLO) {
					v = float64(b) / (output * interval)
				}
			}
		}
		rps[k] = v
	}
}
