package sim

import (
	"reflect"
	"strings"
	"testing"

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
	log := []sched.Step{{Kind: sched.StepTick, Now: 1}, {Kind: sched.StepSetLive, IID: IID(0)}}
	got, err := Replay(rn.d.core, log)
	if err == nil || !strings.Contains(err.Error(), "step 1 (set_live") || len(got) != 1 {
		t.Fatalf("replay of a liveness change: %v after %d steps, want an error at step 1", err, len(got))
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
