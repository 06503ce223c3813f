package sched

import (
	"fmt"
	"sort"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
)

// StepKind names one of the core's inputs.
type StepKind uint8

// The inputs a Step records.
const (
	StepTrack StepKind = iota + 1
	StepPlace
	StepPlaceDecode
	StepPrefillDone
	StepOutputTokens
	StepFinished
	StepTick
	StepSetLive
	StepSetRole
	StepSetProbation
	StepCacheEvidence
	StepSetProfile
)

var stepNames = [...]string{"", "track", "place", "place_decode", "prefill_done", "output_tokens", "finished", "tick",
	"set_live", "set_role", "set_probation", "cache_evidence", "set_profile"}

func (k StepKind) String() string {
	if int(k) < len(stepNames) {
		return stepNames[k]
	}
	return fmt.Sprintf("StepKind(%d)", uint8(k))
}

// Step is one input the core took, with its arguments and its answer. A
// log of steps fed into a core built from the same fleet and profiles gets
// the same answers (the core is deterministic): that is how a router's run
// is checked against the simulator's driver (sim.Replay).
type Step struct {
	Kind     StepKind
	Now      float64 // Track: the arrival time; the Set steps take none
	RID, IID string

	InputLen, WantedLen int          // Track
	Cached              []CachedOn   // Track, CacheEvidence: the cache evidence, sorted by iid
	Exclude             []string     // Place, PlaceDecode: sorted; nil when none
	Attempt             Attempt      // Place
	Tokens              int          // OutputTokens
	On                  bool         // SetLive, SetProbation
	Role                fleet.Role   // SetRole
	Profile             *profile.Row // SetProfile

	Placement Placement  // Place, PlaceDecode
	Refusal   *Refusal   // Place, PlaceDecode
	Decisions []Decision // Tick
}

// Record hands every step the core takes to f, in order, once the step is
// done; nil stops it. The Set steps are recorded only when they change
// something (the router rewrites every engine's liveness on each health
// pass). f runs inside the step: it must not call the core.
func (c *Core) Record(f func(Step)) { c.rec = f }

func (c *Core) log(s Step) {
	if c.rec != nil {
		c.rec(s)
	}
}

// sortedSet is the members of a set, sorted; nil when it has none.
func sortedSet(m map[string]bool) []string {
	var out []string
	for k, in := range m {
		if in {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
