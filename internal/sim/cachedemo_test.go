package sim

import (
	"reflect"
	"testing"

	"github.com/narwhal-go/narwhal/internal/sched"
)

// A shortened shared-prefix demo: cache-aware pricing sustains a higher
// rate than cold pricing on shared prefixes, and is never worse at any
// rate when nothing is shared.
func TestCacheAwareSustainsMoreOnSharedPrefixes(t *testing.T) {
	sweeps := SharedPrefixSweeps(8, 1, 150, 2)
	sweeps[0].Rates = []float64{12, 20}
	sweeps[0].Arms = sweeps[0].Arms[:2] // adaptive cold, adaptive cache-aware
	sweeps[1].Rates = []float64{4, 8}
	sweeps[1].Arms = sweeps[1].Arms[:2]
	for i, s := range sweeps {
		res, err := s.Run()
		if err != nil {
			t.Fatal(err)
		}
		if res.Cache == nil || len(res.Cache.Pairs) != 1 {
			t.Fatalf("sweep %d: no cold/cache-aware pair in %+v", i, res.Cache)
		}
		p := res.Cache.Pairs[0]
		if i == 0 && !(p.HigherRate && p.CacheRPS >= 20) {
			t.Errorf("shared prefixes: cache-aware sustains %g, cold %g: want cache-aware higher, at 20 req/s", p.CacheRPS, p.ColdRPS)
		}
		if !p.NeverWorse {
			t.Errorf("sweep %d: cache-aware attainment fell by %.1f points at some rate", i, -p.WorstDeltaP)
		}
	}
}

func TestBlockKeysShareExactlyThePrefix(t *testing.T) {
	turn1 := Arrival{InputLen: 100, System: 1, SystemLen: 32, Session: 7}
	turn2 := Arrival{InputLen: 200, System: 1, SystemLen: 32, Session: 7}
	other := Arrival{InputLen: 100, System: 1, SystemLen: 32, Session: 8}
	alone := Arrival{InputLen: 100}
	k1, k2, ko, ka := blockKeys(turn1, 0, 16), blockKeys(turn2, 1, 16), blockKeys(other, 2, 16), blockKeys(alone, 3, 16)
	if len(k1) != 6 || len(k2) != 12 {
		t.Fatalf("blocks %d and %d, want 6 and 12", len(k1), len(k2))
	}
	for j := range k1 {
		if k1[j] != k2[j] {
			t.Errorf("turn 2 block %d differs from turn 1's", j)
		}
		if (k1[j] == ko[j]) != (j < 2) {
			t.Errorf("block %d shared with another session: %v, want only the 2 system blocks", j, k1[j] == ko[j])
		}
		if k1[j] == ka[j] {
			t.Errorf("block %d shared with a prompt that shares nothing", j)
		}
	}
	c := newSimCache(16)
	c.store(k1, 100)
	if got := c.resident(k2, turn2.InputLen, false); got != 96 {
		t.Errorf("turn 2 finds %d cached tokens, want turn 1's 96", got)
	}
	if got := c.resident(k1, turn1.InputLen, false); got != 96 {
		t.Errorf("a repeat finds %d, want 96 (the last token is computed)", got)
	}
	c.store(ka, 8) // room for 8: turn 1's oldest blocks go first
	if got := c.resident(k2, turn2.InputLen, false); got != 0 {
		t.Errorf("after eviction turn 2 finds %d cached tokens, want 0", got)
	}
}

// A cache-aware run's steps, with their evidence, replay step for step;
// so does a router's evidence change before a placement.
func TestReplayCarriesCacheEvidence(t *testing.T) {
	f := SharedPrefixFleet(4)
	ss := SharedPrefix(30)
	tr, err := ss.Generate(6, 2, f.Shape.BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	arm := CacheArms(4)[1]
	rn, log := recordedRun(t, f, arm, tr)
	rn.d.core.Record(func(s sched.Step) { log = append(log, s) })
	rn.d.arrive(1e6, "late", 2000, 8, map[string]int{IID(0): 1024})
	rn.d.core.SetCacheEvidence("late", nil)
	rn.d.place(1e6, "late")
	warm := 0
	for _, s := range log {
		if s.Kind == sched.StepPlace && s.Placement.Warm != nil {
			warm++
		}
	}
	if warm == 0 {
		t.Fatal("no placement of a shared-prefix run was priced warm")
	}
	fresh, _ := newRunner(f, arm, tr)
	got, err := Replay(fresh.d.core, log)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, log) {
		t.Fatalf("replay differs: %d steps of %d", len(got), len(log))
	}
}
