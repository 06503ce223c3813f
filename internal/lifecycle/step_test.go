package lifecycle

import (
	"slices"
	"testing"
)

// Step and Ready: a failed leg yields a verdict only at its threshold,
// a success clears the streak, and Ready hands each verdict out once.
func TestStepLegOutcomesYieldVerdictsOnce(t *testing.T) {
	m := New(testFleet(false)) // eject_after 3
	for i, want := range []int{0, 0, 1} {
		m.Step(1, LegFailure{IID: "d0", Class: Timeout})
		rd := m.Ready()
		if len(rd.Verdicts) != want {
			t.Fatalf("failure %d: verdicts %v, want %d", i+1, rd.Verdicts, want)
		}
		if want == 1 && rd.Verdicts[0] != (LegVerdict{IID: "d0", Class: Timeout, Verdict: VerifyHealth}) {
			t.Errorf("verdict %+v, want d0 timeout verify_health", rd.Verdicts[0])
		}
	}
	if rd := m.Ready(); len(rd.Verdicts) != 0 || rd.Streaks["d0"][Timeout] != 3 {
		t.Errorf("a second Ready: verdicts %v, streak %d; want none, 3", rd.Verdicts, rd.Streaks["d0"][Timeout])
	}
	m.Step(2, LegSuccess{IID: "d0", Kind: "health"})
	if rd := m.Ready(); rd.Streaks["d0"][Timeout] != 0 || m.Marked("d0") {
		t.Errorf("after a health success: streak %d, marked %v", rd.Streaks["d0"][Timeout], m.Marked("d0"))
	}
}

// A tick settles drains, ends timed holds and counts readmission passes;
// Ready says which holds ended, which probes to start and the liveness
// to publish.
func TestStepTickSaysWhatToDo(t *testing.T) {
	m := New(testFleet(false)) // readmit_every 10
	m.Quarantine("d0", 5)
	m.Eject("d1", "connection")
	m.Ready() // nothing stepped yet
	for pass := 1; pass <= 10; pass++ {
		m.Step(float64(pass), Tick{Wall: 1000})
		rd := m.Ready()
		if got, want := slices.Contains(rd.Released, "d0"), pass == 5; got != want {
			t.Errorf("pass %d: released %v", pass, rd.Released)
		}
		if got, want := slices.Contains(rd.Probe, "d1"), pass == 10; got != want {
			t.Errorf("pass %d: probes %v", pass, rd.Probe)
		}
		if rd.Live["d0"] != (pass >= 5) || rd.Live["d1"] || !rd.Live["p0"] {
			t.Errorf("pass %d: live %v", pass, rd.Live)
		}
	}
}

// Ready hands out each event once, in order, the restored ones never
// (they are in the old router's journal), and keeps counting past the
// maxEvents the manager keeps.
func TestReadyHandsOutEachEventOnce(t *testing.T) {
	m := New(testFleet(false))
	m.RestoreEvents([]Event{{Action: "old"}})
	m.Note(1, "a", nil)
	m.Note(2, "b", nil)
	if rd := m.Ready(); len(rd.Events) != 2 || rd.Events[0].Action != "a" || rd.Events[1].Action != "b" {
		t.Fatalf("events %v, want a, b", rd.Events)
	}
	if rd := m.Ready(); len(rd.Events) != 0 {
		t.Errorf("events handed out twice: %v", rd.Events)
	}
	for i := 0; i < maxEvents+5; i++ {
		m.Note(float64(i), "n", nil)
	}
	if rd := m.Ready(); len(rd.Events) != maxEvents || rd.Events[maxEvents-1].At != maxEvents+4 {
		t.Errorf("%d events after an overflow, want the %d kept, newest last", len(rd.Events), maxEvents)
	}
	m.Note(9, "c", nil)
	if rd := m.Ready(); len(rd.Events) != 1 || rd.Events[0].Action != "c" {
		t.Errorf("after an overflow: events %v, want c", rd.Events)
	}
}
