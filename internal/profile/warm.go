package profile

// WithWarmFit is r with a warm-prefill fit derived from its cold curve,
// for simulated engines: a cached prefix is attended to but not
// recomputed — the cold terms apply to the suffix against the whole
// context, and each cached token costs readS to read. The domain covers
// prefixes of 16 to maxTokens tokens and suffixes of 1 to maxTokens.
func (r Row) WithWarmFit(readS float64, maxTokens int) Row {
	a, b, c, d, cv := r.TTFTA, r.TTFTB, r.TTFTC, readS, 0.05
	minP, maxP, minS, maxS := 16, maxTokens, 1, maxTokens
	r.CachedTTFTA, r.CachedTTFTB, r.CachedTTFTC, r.CachedTTFTD, r.CachedCVMAPE = &a, &b, &c, &d, &cv
	r.CachedMinPrefixTokens, r.CachedMaxPrefixTokens, r.CachedMinSuffixTokens, r.CachedMaxSuffixTokens = &minP, &maxP, &minS, &maxS
	return r
}

// Warm pricing outside the measured domain (runtime reference §2.3 prices
// inside the fit's domain and cold elsewhere). A conversation's follow-up
// turn is a long cached prefix and a short new suffix — often shorter than
// the sweep's shortest suffix, and a prefix past its longest — so pricing
// it cold ignores the cache exactly where it matters most. Outside the
// domain the fit is used under a bounded rule, and only when the cached
// share is large (WarmExtrapolateShare of the prompt or more):
//
//   - a suffix shorter than the shortest measured is priced as the
//     shortest measured: the fit grows with S (its terms are
//     non-negative), so this can only over-price;
//   - a prefix shorter than the shortest measured is priced as the
//     shortest measured, for the same reason;
//   - a prefix past the longest measured follows the fit's own form, which
//     is linear in P for a given suffix, up to WarmExtrapolatePrefix × the
//     longest measured; past that the prompt is priced cold;
//   - a suffix past the longest measured is priced cold;
//   - the result never exceeds the cold price.
const (
	WarmExtrapolateShare  = 0.5
	WarmExtrapolatePrefix = 2
)

// WarmPrefillTime is the warm price of P cached and S uncached tokens:
// the fit inside its domain, the bounded rule above outside it
// (extrapolated true), and ok false where the prompt is priced cold.
func (r Row) WarmPrefillTime(p, s int) (secs float64, extrapolated, ok bool) {
	if v, in := r.CachedPrefillTime(p, s); in {
		return v, false, true
	}
	if p <= 0 || !r.HasCachedFit() || float64(p) < WarmExtrapolateShare*float64(p+s) ||
		s > *r.CachedMaxSuffixTokens || float64(p) > WarmExtrapolatePrefix*float64(*r.CachedMaxPrefixTokens) {
		return 0, false, false
	}
	s = max(s, *r.CachedMinSuffixTokens)
	p = max(p, *r.CachedMinPrefixTokens)
	P, S := float64(p), float64(s)
	v := *r.CachedTTFTA*(2*P*S+S*S) + *r.CachedTTFTB*S + *r.CachedTTFTD*P + *r.CachedTTFTC + r.splitStep(s)
	return min(max(0, v), r.PrefillTime(p+s)), true, true
}
