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
