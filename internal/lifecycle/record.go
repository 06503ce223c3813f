package lifecycle

import (
	"fmt"
	"reflect"
)

// Entry is one call an owner made: a Step with its input and answer, or
// a Ready (Input nil) with what it handed out. A log of entries fed into
// a manager built from the same fleet gets the same answers (the manager
// is deterministic): that is how a router's availability decisions are
// checked, as sched.Step logs check its scheduling.
type Entry struct {
	Now    float64 // Step's router time; 0 for a Ready
	Input  Input
	Answer Answer
	Ready  *Ready
}

// Record makes fn hear every Step and Ready from now on, inside the
// call (nil stops it). fn must not call back into the manager.
func (m *Manager) Record(fn func(Entry)) { m.recorder = fn }

// Replay feeds log's Steps and Readys into m, a manager built from the
// same fleet, in order, and returns the first entry whose answer differs
// from the recorded one as an error naming it. A nil error means m
// decided everything the recorded manager decided, the same way.
func Replay(m *Manager, log []Entry) error {
	for k, e := range log {
		if e.Input == nil {
			if got := m.Ready(); !reflect.DeepEqual(&got, e.Ready) {
				return fmt.Errorf("lifecycle: entry %d (ready): replayed %+v, recorded %+v", k, got, *e.Ready)
			}
			continue
		}
		if got := m.Step(e.Now, e.Input); !reflect.DeepEqual(got, e.Answer) {
			return fmt.Errorf("lifecycle: entry %d (%T at %gs): replayed %+v, recorded %+v", k, e.Input, e.Now, got, e.Answer)
		}
	}
	return nil
}
