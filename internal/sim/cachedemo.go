package sim

import (
	"fmt"
	"strings"
)

// The shared-prefix demo: the same trace offered to arms that differ only
// in whether prefill is priced with the engines' cache residency.

// SharedPrefixFleet is DemoFleet with prefix caching on every engine and
// DemoWarmProfile's warm-prefill fit.
func SharedPrefixFleet(n int) Fleet {
	f := DemoFleet(n)
	f.PrefixCaching, f.Profile = true, DemoWarmProfile
	return f
}

// CacheArms are adaptive and the even static split, each priced cold and
// cache-aware.
func CacheArms(n int) []Arm {
	var arms []Arm
	for _, base := range []Arm{Adaptive(n), Static(max(1, n/2), n)} {
		cold, warm := base, base
		cold.Name, warm.Name, warm.CacheAware = base.Name+" cold", base.Name+" cache-aware", true
		arms = append(arms, cold, warm)
	}
	return arms
}

// SharedPrefixRates and NoSharingRates are the demo's offered rates for
// eight engines: where cold pricing holds to where both fall below 90%.
func SharedPrefixRates() []float64 { return []float64{8, 12, 16, 20, 24, 28, 32} }

func NoSharingRates() []float64 { return []float64{2, 4, 6, 8, 10, 12} }

// SharedPrefixSweeps are the two sweeps of narwhal demo --workload
// shared-prefix: the shared-prefix sessions, then the same sessions with
// nothing shared. rates are per eight engines and scale with n.
func SharedPrefixSweeps(n int, seed uint64, durationS float64, workers int) []Sweep {
	var out []Sweep
	for _, noShare := range []bool{false, true} {
		ss := SharedPrefix(durationS)
		ss.NoSharing = noShare
		rates := SharedPrefixRates()
		if noShare {
			rates = NoSharingRates()
		}
		s := Sweep{Fleet: SharedPrefixFleet(n), Arms: CacheArms(n), Seed: seed, Sessions: &ss, Target: 0.9, Workers: workers}
		for _, r := range rates {
			s.Rates = append(s.Rates, r*float64(n)/8)
		}
		out = append(out, s)
	}
	return out
}

// CacheComparison is each cache-aware arm against its cold twin.
type CacheComparison struct {
	Pairs []CachePair `json:"pairs"`
}

// CachePair is one arm priced cold and cache-aware.
type CachePair struct {
	Arm         string  `json:"arm"`
	ColdRPS     float64 `json:"cold_rps"`
	CacheRPS    float64 `json:"cache_aware_rps"`
	NeverWorse  bool    `json:"never_worse"` // attainment ≥ cold's at every rate
	HigherRate  bool    `json:"higher_rate"` // sustains a higher rate
	WorstDeltaP float64 `json:"worst_delta_pct"`
}

// compareCache pairs arms that differ only in CacheAware.
func compareCache(arms []ArmResult) *CacheComparison {
	var c CacheComparison
	for i, cold := range arms {
		if cold.CacheAware {
			continue
		}
		for _, warm := range arms[i+1:] {
			if !warm.CacheAware || warm.Policy != cold.Policy || warm.Prefill != cold.Prefill || warm.Aggregated != cold.Aggregated {
				continue
			}
			p := CachePair{Arm: strings.TrimSuffix(cold.Name, " cold"), ColdRPS: cold.SustainedRPS, CacheRPS: warm.SustainedRPS,
				NeverWorse: true, HigherRate: warm.SustainedRPS > cold.SustainedRPS}
			for k := range cold.Runs {
				d := 100 * (warm.Runs[k].Attainment - cold.Runs[k].Attainment)
				p.WorstDeltaP = min(p.WorstDeltaP, d)
				p.NeverWorse = p.NeverWorse && d >= 0
			}
			c.Pairs = append(c.Pairs, p)
			break
		}
	}
	if len(c.Pairs) == 0 {
		return nil
	}
	return &c
}

// Line is the cache verdict a shared-prefix table ends with.
func (c CacheComparison) Line() string {
	var s string
	for _, p := range c.Pairs {
		s += fmt.Sprintf("%s: cache-aware sustains %s, cold pricing %s (worst attainment change %+.1f points)\n",
			p.Arm, sustainedPhrase(p.CacheRPS), sustainedPhrase(p.ColdRPS), p.WorstDeltaP)
	}
	return s
}
