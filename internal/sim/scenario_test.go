package sim

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Scenario tests for role control under the simulator (issue 6). They
// assert behaviour, not today's numbers: a controller change that breaks
// one of them has changed what the fleet does.

// controlled are the arms whose policy moves roles, on an n-engine fleet.
func controlled(n int) []Arm { return []Arm{Adaptive(n), Arrow(n)} }

func small(n int, configure func(*fleet.Config)) Fleet {
	f := DemoFleet(n)
	f.Configure = configure
	return f
}

func mustGenerate(t *testing.T, segs []Segment, rate float64, seed uint64) Trace {
	t.Helper()
	tr, err := Generate(segs, rate, seed)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustRun(t *testing.T, f Fleet, a Arm, tr Trace) *Result {
	t.Helper()
	r, err := Run(f, a, tr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// phases is balanced, then prefill-heavy, then decode-heavy, each segS.
func phases(segS float64) []Segment { return MovingSegments(segS) }

// A prefill-heavy phase moves roles toward prefill, and they move back
// once it ends.
func TestScenarioPrefillPhaseMovesRolesAndBack(t *testing.T) {
	const segS = 200
	tr := mustGenerate(t, phases(segS), 5, 11)
	for _, a := range controlled(4) {
		t.Run(a.Name, func(t *testing.T) {
			r := mustRun(t, DemoFleet(4), a, tr)
			start := r.PrefillAt(segS)
			peak := r.MaxPrefill(segS, 2*segS+10)
			end := r.PrefillAt(3 * segS)
			if peak <= start {
				t.Errorf("prefill pool stayed at %d through the prefill-heavy phase (splits %v)", start, r.Splits)
			}
			if end >= peak {
				t.Errorf("prefill pool still %d at the end of the decode-heavy phase, peak was %d (splits %v)", end, peak, r.Splits)
			}
		})
	}
}

// Pinned engines never move, even when the controller moves others.
func TestScenarioPinnedEnginesNeverMove(t *testing.T) {
	pin := func(c *fleet.Config) {
		c.Engines[0].Pin = true                // a prefill engine
		c.Engines[len(c.Engines)-1].Pin = true // a decode engine
	}
	tr := mustGenerate(t, phases(150), 5, 12)
	for _, a := range controlled(4) {
		t.Run(a.Name, func(t *testing.T) {
			r := mustRun(t, small(4, pin), a, tr)
			if r.PinnedMoves != 0 {
				t.Errorf("%d flips moved a pinned engine (splits %v)", r.PinnedMoves, r.Splits)
			}
			if r.Flips == 0 {
				t.Errorf("no flips at all: the scenario did not exercise the controller")
			}
		})
	}
}

// The floors hold at every observation, whichever way the trace pushes.
func TestScenarioFloorsAlwaysHold(t *testing.T) {
	floors := func(c *fleet.Config) { c.Controller.MinPrefill, c.Controller.MinDecode = 2, 2 }
	tr := mustGenerate(t, phases(150), 7, 13)
	for _, a := range controlled(6) {
		t.Run(a.Name, func(t *testing.T) {
			r := mustRun(t, small(6, floors), a, tr)
			if r.MinPrefill < 2 || r.MinDecode < 2 {
				t.Errorf("pools fell to %dP / %dD, below the 2/2 floors (splits %v)", r.MinPrefill, r.MinDecode, r.Splits)
			}
			if r.Flips == 0 {
				t.Errorf("no flips at all: the scenario did not exercise the controller")
			}
		})
	}
}

// A stationary trace makes at most a handful of flips per simulated hour.
func TestScenarioStationaryTraceDoesNotThrash(t *testing.T) {
	const hour, handful = 3600, 5
	steady := []Segment{{Name: "steady", DurationS: hour, InputMean: 512, OutputMean: 64, Spread: 0.4, InputMax: 4096, OutputMax: 512}}
	tr := mustGenerate(t, steady, 3, 14)
	for _, a := range controlled(4) {
		t.Run(a.Name, func(t *testing.T) {
			r := mustRun(t, DemoFleet(4), a, tr)
			if r.Flips > handful {
				t.Errorf("%d flips (%d reversals) in one simulated hour of stationary traffic, want at most %d (splits %v)",
					r.Flips, r.Reversals, handful, r.Splits)
			}
			if r.Attainment < 0.9 {
				t.Errorf("attainment %.3f: the steady load should be easy for four engines", r.Attainment)
			}
		})
	}
}

// An idle fleet makes no decisions and moves nothing.
func TestScenarioIdleFleetMakesNoDecisions(t *testing.T) {
	for _, a := range controlled(4) {
		t.Run(a.Name, func(t *testing.T) {
			r := mustRun(t, DemoFleet(4), a, Trace{DurationS: 600})
			if r.Decisions != 0 || r.Flips != 0 {
				t.Errorf("idle fleet: %d decisions %v, %d flips", r.Decisions, r.ByResult, r.Flips)
			}
			if r.SimulatedS < 600 {
				t.Errorf("simulated %v s, want the whole 600 s window of monitor ticks", r.SimulatedS)
			}
		})
	}
}
