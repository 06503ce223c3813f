package sweep

import (
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/profile/fit"
)

// row assembles the profile row from the accepted fits and checks it
// with the same rules preflight applies (profile.Row.Problems).
func (m *meter) row(pf fit.Prefill, d fit.Decode, w *fit.Warm, gen string) (*profile.Row, error) {
	r := profile.Row{IID: m.t.IID, GenerationDigest: &gen, TTFTA: pf.A, TTFTB: pf.B, TTFTC: pf.C,
		TPOTSlope: d.Slope, TPOTIntercept: d.Intercept, TPOTRequestSlope: ptr(d.RequestSlope),
		DecodeFitMAPE: ptr(d.FitMAPE), DecodeCVMAPE: ptr(d.CVMAPE),
		PrefillMinTokens: ptr(m.plan.prefill[0]), PrefillMaxTokens: ptr(m.plan.prefill[len(m.plan.prefill)-1])}
	if pf.BlockTokens > 0 {
		r.TTFTBlockTokens, r.TTFTSplit = ptr(pf.BlockTokens), ptr(pf.Split)
	}
	minQ, maxQ, minK, maxK := m.decodeDomain()
	r.DecodeMinRequests, r.DecodeMaxRequests, r.DecodeMinKVTokens, r.DecodeMaxKVTokens = &minQ, &maxQ, &minK, &maxK
	if kv := m.s.KVCapacityTokens; kv > 0 {
		r.KVCapacityTokens = ptr(max(kv, maxK))
	}
	if w != nil {
		r.CachedTTFTA, r.CachedTTFTB, r.CachedTTFTC, r.CachedTTFTD = &w.A, &w.B, &w.C, &w.D
		r.CachedCVMAPE = &w.CVMAPE
		r.CachedMinPrefixTokens, r.CachedMaxPrefixTokens = ptr(w.MinP), ptr(w.MaxP)
		r.CachedMinSuffixTokens, r.CachedMaxSuffixTokens = ptr(w.MinS), ptr(w.MaxS)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("fitted row: %w (raw samples kept)", err)
	}
	if probs := r.Problems(m.cfg.Limits); len(probs) > 0 {
		return nil, fmt.Errorf("fitted row refused: %s (raw samples kept)", strings.Join(probs, "; "))
	}
	return &r, nil
}

// decodeDomain is the request and resident-KV range the intervals cover.
func (m *meter) decodeDomain() (minQ, maxQ, minK, maxK int) {
	for i, s := range m.s.Decode {
		if i == 0 {
			minQ, maxQ, minK, maxK = s.Requests, s.Requests, s.ResidentKV, s.ResidentKV
			continue
		}
		minQ, maxQ = min(minQ, s.Requests), max(maxQ, s.Requests)
		minK, maxK = min(minK, s.ResidentKV), max(maxK, s.ResidentKV)
	}
	return minQ, maxQ, minK, maxK
}

func ptr[T any](v T) *T { return &v }
