package lifecycle

// Step and Ready are the manager as a state machine, sched's shape (and
// etcd raft's): the owner feeds what happened with Step — a leg's
// outcome, a monitor tick — and asks Ready what to do about everything
// stepped since the last Ready: verdicts to act on, probes to start,
// timed holds that ended, engine_lifecycle events to journal, the
// liveness to publish and the gauges. Nothing here locks, does I/O or
// reads a clock; an owner that serializes the manager under a lock takes
// Step and Ready in one critical section and acts with the lock released.
//
// Probe results, operator actions and restored handoffs are inputs too
// (inputs.go): an owner changes the manager only with Step and Ready, so
// a recorded log of both replays into a fresh manager (Replay).

// Input is one thing that happened, for Step.
type Input interface{ input() }

// LegFailure is a failed leg of class Class on IID.
type LegFailure struct {
	IID   string
	Class Class
}

// LegSuccess is a kind of success on IID (see Success).
type LegSuccess struct{ IID, Kind string }

// Tick is a monitor pass: router time comes with Step, Wall is wall-clock
// Unix seconds for the drain records, Resident each engine's resident
// requests now.
type Tick struct {
	Wall     float64
	Resident map[string]int
}

func (LegFailure) input() {}
func (LegSuccess) input() {}
func (Tick) input()       {}

// LegVerdict is a breaker verdict on one failed leg.
type LegVerdict struct {
	IID     string
	Class   Class
	Verdict Verdict
}

// Ready is what the owner must do after the Steps since the last Ready.
type Ready struct {
	Verdicts []LegVerdict // failed legs whose streak crossed its threshold
	Probe    []string     // ejected engines whose readmission probe is due
	Released []string     // engines whose timed hold ended
	Events   []Event      // engine_lifecycle events not yet handed out
	Live     map[string]bool
	States   map[string]State         // each engine's lifecycle state, for the gauges
	Streaks  map[string]map[Class]int // each engine's streaks, for the gauges
}

// pending is what Step produced since the last Ready.
type pending struct {
	verdicts []LegVerdict
	probe    []string
	released []string
}

// Step applies one input at router time now and returns its answer.
func (m *Manager) Step(now float64, in Input) Answer {
	a := m.apply(now, in)
	if m.recorder != nil {
		m.recorder(Entry{Now: now, Input: in, Answer: a})
	}
	return a
}

func (m *Manager) apply(now float64, in Input) Answer {
	switch in := in.(type) {
	case LegFailure:
		if v := m.Failure(in.IID, in.Class); v != None {
			m.pending.verdicts = append(m.pending.verdicts, LegVerdict{IID: in.IID, Class: in.Class, Verdict: v})
		}
	case LegSuccess:
		m.Success(in.IID, in.Kind)
	case Tick:
		m.Settle(in.Wall, func(iid string) int { return in.Resident[iid] })
		m.pending.released = append(m.pending.released, m.ReleaseQuarantines(now)...)
		m.pending.probe = append(m.pending.probe, m.DueForProbe()...)
	default:
		if a, ok := m.stepProbe(now, in); ok {
			return a
		}
		a, _ := m.stepAction(in)
		return a
	}
	return Answer{}
}

// Ready hands out what the Steps since the last call produced, the
// events recorded since then by any method, and the state to publish.
func (m *Manager) Ready() Ready {
	r := m.ready()
	if m.recorder != nil {
		m.recorder(Entry{Ready: &r})
	}
	return r
}

func (m *Manager) ready() Ready {
	r := Ready{Verdicts: m.pending.verdicts, Probe: m.pending.probe, Released: m.pending.released,
		Events: m.newEvents(), Live: m.LiveSet(), States: map[string]State{}, Streaks: m.Streaks()}
	for _, iid := range m.order {
		r.States[iid] = m.engines[iid].rec.State
	}
	m.pending = pending{}
	return r
}

// LiveSet is Live for every engine.
func (m *Manager) LiveSet() map[string]bool {
	live := make(map[string]bool, len(m.order))
	for _, iid := range m.order {
		live[iid] = m.Live(iid)
	}
	return live
}

// newEvents returns the events recorded since they were last handed out
// (at most the maxEvents kept) and marks them handed out.
func (m *Manager) newEvents() []Event {
	n := min(m.recorded-m.handed, len(m.events))
	m.handed = m.recorded
	return append([]Event(nil), m.events[len(m.events)-n:]...)
}
