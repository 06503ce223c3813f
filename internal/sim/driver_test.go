package sim

import (
	"reflect"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// A simulated run's own steps replay through the driver into a fresh core
// step for step, for every arm (Arrow's inline flips and aggregated decode
// included): the driver is all the runner uses to step the core.
func TestReplayOfASimulatedRun(t *testing.T) {
	f := DemoFleet(4)
	tr := mustGenerate(t, MovingSegments(20), 10, 3)
	for _, a := range AllArms(4) {
		_, log := recordedRun(t, f, a, tr)
		fresh, err := newRunner(f, a, tr) // the same fleet and options, untouched
		if err != nil {
			t.Fatal(err)
		}
		got, err := Replay(fresh.d.core, log)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(log) || len(log) == 0 {
			t.Fatalf("%s: replay took %d steps of %d", a.Name, len(got), len(log))
		}
		for k := range log {
			if !reflect.DeepEqual(got[k], log[k]) {
				t.Fatalf("%s step %d: replayed %+v, recorded %+v", a.Name, k, got[k], log[k])
			}
		}
	}
}

// A step the simulator never takes is an error, not a silent skip.
func TestReplayRefusesStepsTheSimulatorNeverTakes(t *testing.T) {
	rn, err := newRunner(DemoFleet(2), Static(1, 2), one(10, 2))
	if err != nil {
		t.Fatal(err)
	}
	log := []sched.Step{{Kind: sched.StepTick, Now: 1}, {Kind: sched.StepSetRole, IID: IID(0), Role: fleet.Decode}}
	got, err := Replay(rn.d.core, log)
	if err == nil || !strings.Contains(err.Error(), "step 1 (set_role") || len(got) != 1 {
		t.Fatalf("replay of a role handoff: %v after %d steps, want an error at step 1", err, len(got))
	}
}

// recordedRun simulates arm on tr and returns the runner and every step
// its core took.
func recordedRun(t *testing.T, f Fleet, a Arm, tr Trace) (*runner, []sched.Step) {
	t.Helper()
	rn, err := newRunner(f, a, tr)
	if err != nil {
		t.Fatal(err)
	}
	var log []sched.Step
	rn.d.core.Record(func(s sched.Step) { log = append(log, s) })
	if err := rn.loop(); err != nil {
		t.Fatal(err)
	}
	return rn, log
}

// An outage takes its engine out of placement for its window and back,
// as two liveness steps, and the run with them replays step for step.
func TestOutageLeavesPlacementAndReplays(t *testing.T) {
	f := DemoFleet(4)
	f.Outages = []Outage{{Engine: 3, FromS: 5, ToS: 15}}
	tr := mustGenerate(t, MovingSegments(20), 10, 3)
	_, log := recordedRun(t, f, Static(1, 4), tr)
	var live []sched.Step
	placedOut := 0
	for _, s := range log {
		switch {
		case s.Kind == sched.StepSetLive:
			live = append(live, s)
		case (s.Kind == sched.StepPlace || s.Kind == sched.StepPlaceDecode) && s.Refusal == nil &&
			s.Placement.IID == IID(3) && s.Now > 5 && s.Now < 15:
			placedOut++
		}
	}
	if len(live) != 2 || live[0].IID != IID(3) || live[1].IID != IID(3) || live[0].On || !live[1].On {
		t.Fatalf("liveness steps %+v, want e03 out then back", live)
	}
	if placedOut != 0 {
		t.Errorf("%d placements on e03 during its outage", placedOut)
	}
	fresh, err := newRunner(f, Static(1, 4), tr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Replay(fresh.d.core, log)
	if err != nil || !reflect.DeepEqual(got, log) {
		t.Fatalf("replay of the outage run: %v (%d of %d steps equal)", err, equalPrefix(got, log), len(log))
	}
}

// An outage must name an engine of the fleet and a window that ends after
// it starts, and one engine's outages must not overlap.
func TestOutageIsChecked(t *testing.T) {
	for _, o := range [][]Outage{
		{{Engine: 4, FromS: 1, ToS: 2}},
		{{Engine: 0, FromS: 2, ToS: 2}},
		{{Engine: 0, FromS: -1, ToS: 2}},
		{{Engine: 1, FromS: 1, ToS: 5}, {Engine: 1, FromS: 4, ToS: 6}},
	} {
		f := DemoFleet(4)
		f.Outages = o
		if _, err := newRunner(f, Static(1, 4), one(10, 2)); err == nil || !strings.Contains(err.Error(), "outages[") {
			t.Errorf("outages %+v: %v, want an outages error", o, err)
		}
	}
}

func equalPrefix(a, b []sched.Step) int {
	n := 0
	for n < min(len(a), len(b)) && reflect.DeepEqual(a[n], b[n]) {
		n++
	}
	return n
}
