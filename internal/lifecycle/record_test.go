package lifecycle

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/vllm"
)

// history steps m through every kind of input an owner sends — leg
// outcomes, ticks, probe results, holds, an operator's drain and
// readmission, a note — with Readys between, as avail does.
func history(m *Manager) {
	old := vllm.Identity{Version: "0.11.0", ProcessStart: 100}
	m.Step(0, RestoreEvents{Events: []Event{{At: 990, Action: "readmitted", Fields: map[string]any{"iid": "p0"}}}})
	m.Step(0, Restore{Starts: map[string]float64{"p0": 50}})
	m.Step(1, CheckIdentity{IID: "d0", Seen: old})
	m.Step(1, AcceptIdentity{IID: "d1", ID: old})
	for range 3 {
		m.Step(2, LegFailure{IID: "d1", Class: Connection})
	}
	m.Step(2, LegFailure{IID: "p0", Class: Timeout})
	m.Step(2, LegSuccess{IID: "p0", Kind: "health"})
	m.Ready()
	m.Step(3, Ejection{IID: "d1", Cause: "connection"})
	m.Step(4, Tick{Wall: 1000, Resident: map[string]int{}})
	m.Step(5, Recover{IID: "d1"})
	m.Step(6, Quarantine{IID: "p0", Until: 8})
	m.Step(9, ReleaseQuarantines{})
	m.Step(10, ObserveVersion{IID: "d0", Version: "0.11.0"})
	m.Step(11, HoldOut{IID: "d1", Cause: HoldEngineAuth, Detail: "401"})
	m.Step(12, ReleaseHold{IID: "d1", Cause: HoldEngineAuth})
	m.Step(12, KVRefused{Consumer: "d0", Producer: "p0", LocalHash: "aa", RemoteHash: "bb"})
	m.Step(12, NewProcess{IID: "p0", Start: 60})
	m.Ready()
	m.Step(13, BeginDrain{IID: "d0", Wall: 1010, DeadlineS: 30})
	m.Step(13, FinishDrain{IID: "d0", Wall: 1010, ID: old})
	m.Step(14, Tick{Wall: 1011, Resident: map[string]int{"d0": 0}})
	rd := m.Step(15, BeginReadmit{IID: "d0", Wall: 1012})
	m.Step(16, FinishReadmit{IID: "d0", Wall: 1012, Seen: vllm.Identity{Version: "0.11.0", ProcessStart: 200},
		Checks: []Check{{Name: "process_identity", OK: rd.RequireNewer && rd.Old != nil}}})
	m.Step(17, Note{At: 1013, Action: "recovery_blocked", Fields: map[string]any{"iid": "p0"}})
	m.Step(18, BeginDrain{IID: "p0", Wall: 1014, DeadlineS: 30})
	m.Step(18, FinishDrain{IID: "p0", Wall: 1014, Failure: "GET /metrics: connection refused"})
	m.Ready()
}

// A recorded history replays into a fresh manager of the same fleet
// answer for answer, and ends in the same state; a log whose answer was
// not the manager's is named at its entry.
func TestRecordedHistoryReplays(t *testing.T) {
	m := New(testFleet(true))
	var log []Entry
	m.Record(func(e Entry) { log = append(log, e) })
	history(m)
	m.Record(nil)
	if r := m.Records(); r[0].State != Active || r[0].NewProcessStart == nil || r[2].State != Blocked {
		t.Fatalf("the history did not readmit d0 and block p0's drain: %+v", r)
	}
	kinds := map[string]bool{}
	for _, e := range log {
		kinds[fmt.Sprintf("%T", e.Input)] = true
	}
	if len(kinds) != 22 || !kinds["<nil>"] {
		t.Fatalf("the history steps %d kinds of input (%v), want all 21 and Readys", len(kinds)-1, kinds)
	}

	fresh := New(testFleet(true))
	if err := Replay(fresh, log); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fresh.Records(), m.Records()) || !reflect.DeepEqual(fresh.Events(), m.Events()) ||
		!reflect.DeepEqual(fresh.Holds(), m.Holds()) || !reflect.DeepEqual(fresh.Ejected(), m.Ejected()) {
		t.Errorf("after the replay the managers differ:\n  records %+v\n  want %+v", fresh.Records(), m.Records())
	}

	tampered := append([]Entry(nil), log...)
	for k, e := range tampered {
		if _, ok := e.Input.(Recover); ok {
			tampered[k].Answer.Changed = false // the recorded manager said the engine came back
			if err := Replay(New(testFleet(true)), tampered); err == nil || !strings.Contains(err.Error(), "lifecycle.Recover") {
				t.Errorf("a tampered answer: %v, want an error naming the Recover entry", err)
			}
			return
		}
	}
	t.Fatal("no Recover entry in the log")
}
