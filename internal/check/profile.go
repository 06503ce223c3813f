package check

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/units"
)

// row is iid's profile row, when the store holds one; pace then
// compares against each engine's own curve.
func (r *run) row(iid string) (profile.Row, bool) {
	if r.o.Profiles == nil {
		return profile.Row{}, false
	}
	return r.o.Profiles.Get(iid)
}

func (r *run) profile(_ context.Context, g *Gate) {
	if r.o.Profiles == nil {
		reason := "no profile store"
		if r.o.ProfilesErr != nil {
			reason = r.o.ProfilesErr.Error()
		}
		for _, e := range r.cfg.Engines {
			g.add(Fail, e.IID, "%s has no profile (%s); run narwhal-profile --fleet <config>", e.IID, reason)
		}
		return
	}
	for _, e := range r.cfg.Engines {
		row, ok := r.row(e.IID)
		if !ok {
			g.add(Fail, e.IID, "%s has no profile; run narwhal-profile --fleet <config>", e.IID)
			continue
		}
		if probs := r.rowProblems(row); len(probs) > 0 {
			for _, p := range probs {
				g.add(Fail, e.IID, "%s profile: %s", e.IID, p)
			}
			continue
		}
		g.add(OK, e.IID, "%s ttft=%.3gn^2+%.3gn+%.3g tpot=%.3gq+%.3g decode_fit_mape=%.3f decode_cv_mape=%.3f",
			e.IID, row.TTFTA, row.TTFTB, row.TTFTC, row.TPOTSlope, row.TPOTIntercept, deref(row.DecodeFitMAPE), deref(row.DecodeCVMAPE))
		r.generation(g, e.IID, row)
	}
	known := map[string]bool{}
	for _, e := range r.cfg.Engines {
		known[e.IID] = true
	}
	for _, row := range r.o.Profiles.Profiles {
		if !known[row.IID] {
			g.add(Fail, row.IID, "profile store holds %s, which is not in the fleet; reprofile or remove the row", row.IID)
		}
	}
}

// generation binds a profile to the process it measured: with a contract
// the verified attestation, without one the engine identity
// (profile.Generation, the digest narwhal-profile wrote).
func (r *run) generation(g *Gate, iid string, row profile.Row) {
	if row.GenerationDigest == nil {
		g.add(Warn, iid, "%s profile has no generation evidence; reprofile with a generation-binding narwhal-profile", iid)
		return
	}
	live, ok := r.liveGeneration(iid)
	if !ok {
		return
	}
	if err := profile.CheckGeneration(row, live); err != nil {
		g.add(Fail, iid, "%v", err)
		r.incompatible[iid] = "profile generation"
		return
	}
	g.add(OK, iid, "%s profile generation %s", iid, live)
}

// liveGeneration is iid's generation digest from what identity and
// contract already verified; false when neither was read.
func (r *run) liveGeneration(iid string) (string, bool) {
	att := ""
	if p, ok := r.attested[iid]; ok {
		att = p.AttestationDigest
	} else if r.cfg.EngineContract != nil {
		return "", false // contracted but unverified: the contract gate already failed it
	}
	id, ok := r.identity[iid]
	if !ok && att == "" {
		return "", false
	}
	live, err := profile.Generation(id.Version, id.ProcessStart, att)
	return live, err == nil
}

func (r *run) rowProblems(row profile.Row) []string {
	return row.Problems(profile.Limits{MaxDecodeFitMAPE: r.cfg.Profiles.MaxDecodeFitMAPE, MaxDecodeCVMAPE: r.cfg.Profiles.MaxDecodeCVMAPE})
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// paceTime is one engine's best cold prefill.
type paceTime struct {
	iid    string
	t      float64
	tokens int
}

// pace times a long cold prompt on each live engine (best of two) and
// fails an engine slower than tolerance × its profile (or the median).
func (r *run) pace(ctx context.Context, g *Gate) {
	var times []paceTime
	for _, e := range r.liveEngines() {
		pt, err := r.paceProbe(ctx, e.IID)
		if err != nil {
			g.add(Fail, e.IID, "%s pace probe: %v", e.IID, err)
			r.slow[e.IID] = true
			continue
		}
		times = append(times, pt)
	}
	r.judgePace(g, times)
	r.skipUnreachable(g)
}

func (r *run) judgePace(g *Gate, times []paceTime) {
	tol := r.o.PaceTolerance
	median := medianOf(times)
	for _, pt := range times {
		row, ok := r.row(pt.iid)
		limit, basis := 0.0, ""
		switch {
		case ok && pt.tokens > 0 && row.PrefillTime(pt.tokens) > 0:
			limit, basis = tol*row.PrefillTime(pt.tokens), fmt.Sprintf("profile prefill_time(%d)=%.3fs", pt.tokens, row.PrefillTime(pt.tokens))
		case len(times) >= 3:
			limit, basis = tol*median, fmt.Sprintf("fleet median %.3fs", median)
		default:
			g.add(Skip, pt.iid, "pace needs 3 engines or individual profiles with exact prompt lengths")
			continue
		}
		if pt.t > limit {
			g.add(Fail, pt.iid, "%s prefilled %d tokens in %.3fs, more than %.2g x %s", pt.iid, pt.tokens, pt.t, tol, basis)
			r.slow[pt.iid] = true
			continue
		}
		g.add(OK, pt.iid, "%s prefilled %d tokens in %.3fs (limit %.3fs from %s)", pt.iid, pt.tokens, pt.t, limit, basis)
	}
}

func medianOf(ts []paceTime) float64 {
	if len(ts) == 0 {
		return 0
	}
	v := make([]float64, len(ts))
	for i, t := range ts {
		v[i] = t.t
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// paceProbe runs up to two cold completions and keeps the fastest; a
// prompt the context cannot hold is halved (at most 6 times).
func (r *run) paceProbe(ctx context.Context, iid string) (paceTime, error) {
	best := paceTime{iid: iid, t: math.Inf(1)}
	n := r.o.PaceWords
	for rep, shrink := 0, 0; rep < 2; rep++ {
		body := mustJSON(map[string]any{"model": r.cfg.Model, "prompt": words(n), "max_tokens": 1, "temperature": 0,
			"stream": false, "cache_salt": r.o.IDs.NewID()})
		c, cancel := context.WithTimeout(ctx, units.Seconds(r.cfg.Serving.PrefillTimeoutS))
		start := time.Now()
		out, err := r.probes.Client(iid).Complete(c, body)
		elapsed := time.Since(start).Seconds()
		cancel()
		if fe := fault.As(err); fe != nil && fe.Status == 400 && shrink < 6 && n > 1 {
			n, shrink, rep = n/2, shrink+1, rep-1
			continue
		}
		if err != nil {
			return paceTime{}, fmt.Errorf("%s", fault.Detail(err))
		}
		if elapsed < best.t {
			best.t, best.tokens = elapsed, out.PromptTokens
		}
	}
	return best, nil
}

// slo checks that each engine's profile can hold the TPOT target at its
// smallest measured batch and that TTFT leaves room for a one-token prefill.
func (r *run) slo(_ context.Context, g *Gate) {
	for _, e := range r.cfg.Engines {
		row, ok := r.row(e.IID)
		if !ok {
			g.add(Skip, e.IID, "%s has no profile", e.IID)
			continue
		}
		if row.DecodeMinRequests == nil || row.DecodeMinKVTokens == nil {
			g.add(Fail, e.IID, "%s TPOT qualification requires measured request and KV bounds", e.IID)
			continue
		}
		q, b := *row.DecodeMinRequests, *row.DecodeMinKVTokens
		if ti := row.TokenInterval(b, q); ti > r.cfg.SLO.TPOT {
			g.add(Fail, e.IID, "%s token interval %.4fs at %d requests and %d KV tokens exceeds slo.tpot_s %v", e.IID, ti, q, b, r.cfg.SLO.TPOT)
			continue
		}
		if p1 := row.PrefillTime(1); r.cfg.SLO.TTFT <= p1 {
			g.add(Fail, e.IID, "%s slo.ttft_s %v is not above a one-token prefill (%.4fs)", e.IID, r.cfg.SLO.TTFT, p1)
			continue
		}
		g.add(OK, e.IID, "%s holds %.0f batch tokens across %d requests at the TPOT target", e.IID, row.MT(r.cfg.SLO.TPOT, q), q)
	}
}

func words(n int) string { return strings.Repeat("benchmark ", n) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("check: marshal %T: %v", v, err)) // only literals
	}
	return b
}
