package lifecycle

import (
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Conflict is a lifecycle request that cannot apply in the current state
// (HTTP 409); other errors mean the action was accepted but failed (503).
type Conflict struct{ Msg string }

func (c *Conflict) Error() string { return c.Msg }

func conflict(format string, args ...any) error { return &Conflict{Msg: fmt.Sprintf(format, args...)} }

// maxEvents is how many engine_lifecycle events the manager keeps.
const maxEvents = 200

func (m *Manager) event(at float64, action string, fields map[string]any) {
	m.recorded++
	m.events = append(m.events, Event{At: at, Action: action, Fields: fields})
	if len(m.events) > maxEvents {
		m.events = append(m.events[:0], m.events[len(m.events)-maxEvents:]...)
	}
}

// Events returns the kept engine_lifecycle events, oldest first.
func (m *Manager) Events() []Event {
	return append([]Event(nil), m.events...)
}

// Drain starts an operator drain of iid at wall time now: the engine
// leaves placement at once and its process identity is captured so that
// readmission can insist on a newer process. lastLive reports whether iid
// is the only live engine left (a single-engine drain would stop service).
// capture does engine I/O: an owner that serializes calls under a lock
// calls BeginDrain and FinishDrain itself and captures between them.
func (m *Manager) Drain(iid string, now, deadlineS float64, lastLive bool, capture func() (vllm.Identity, error)) (Record, error) {
	if rec, err := m.BeginDrain(iid, now, deadlineS, lastLive); err != nil {
		return rec, err
	}
	id, err := capture()
	return m.FinishDrain(iid, now, id, err)
}

// BeginDrain checks the request and takes iid out of placement; on nil
// the caller captures the identity and calls FinishDrain.
func (m *Manager) BeginDrain(iid string, now, deadlineS float64, lastLive bool) (Record, error) {
	e := m.engines[iid]
	switch {
	case e == nil:
		return Record{}, conflict("unknown engine(s): %s", iid)
	case deadlineS <= 0:
		return e.rec, conflict("deadline_s must be positive")
	case e.rec.State == Draining || e.rec.State == Drained || e.rec.State == Validating || e.rec.State == DeadlineExceeded:
		return e.rec, conflict("lifecycle action already active for %s", iid)
	case e.rec.State == Active && lastLive:
		return e.rec, conflict("the last schedulable engine requires a whole-wave drain")
	}
	deadline := now + deadlineS
	e.rec = Record{IID: iid, State: Draining, RequestedAt: &now, DeadlineAt: &deadline, RestartRequired: true, Checks: []Check{}}
	m.event(now, "drain_started", map[string]any{"iid": iid, "wave_id": ""})
	if miss := m.missingContract(); miss != "" {
		return m.block(iid, now, "lifecycle drain requires a complete engine_contract", miss)
	}
	return e.rec, nil
}

// FinishDrain records the captured identity, or blocks on its failure.
func (m *Manager) FinishDrain(iid string, now float64, id vllm.Identity, err error) (Record, error) {
	if err != nil {
		return m.block(iid, now, fmt.Sprintf("%s: identity capture failed: %v", iid, err), "")
	}
	e := m.engines[iid]
	start := id.ProcessStart
	e.rec.OldProcessStart = &start
	e.identity = &id
	m.event(now, "process_recorded", map[string]any{"iid": iid, "process_start": start, "wave_id": ""})
	return e.rec, nil
}

// block holds iid out with the failure recorded; missing non-empty means
// the failure is the missing contract.
func (m *Manager) block(iid string, now float64, msg, missing string) (Record, error) {
	e := m.engines[iid]
	e.rec.State, e.rec.Error = Blocked, msg
	if missing != "" {
		e.rec.Checks = []Check{{Name: "missing-contract", OK: false, Detail: msg + "; " + missing}}
	}
	m.event(now, "drain_blocked", map[string]any{"iid": iid, "error": msg, "wave_id": ""})
	return e.rec, fmt.Errorf("%s", msg)
}

// Settle advances drains at wall time now: a draining engine whose
// resident work is gone is drained; one past its deadline with work left
// is deadline_exceeded. resident runs inside the call: it must not call
// back into the manager or do I/O.
func (m *Manager) Settle(now float64, resident func(iid string) int) {
	for _, iid := range m.order {
		e := m.engines[iid]
		if e.rec.State != Draining && e.rec.State != DeadlineExceeded {
			continue
		}
		n := resident(iid)
		switch {
		case n == 0 && e.rec.OldProcessStart != nil:
			e.rec.State, e.rec.Error = Drained, ""
			m.event(now, "drain_complete", map[string]any{"iid": iid, "wave_id": ""})
		case e.rec.State == Draining && e.rec.DeadlineAt != nil && now > *e.rec.DeadlineAt:
			e.rec.State = DeadlineExceeded
			e.rec.Error = fmt.Sprintf("%d resident request(s) remain after the drain deadline", n)
			m.event(now, "drain_deadline_exceeded", map[string]any{"iid": iid, "resident": n, "wave_id": ""})
		}
	}
}

// Gates runs the readmission gates for iid and returns their outcomes;
// requireNewer asks the process-identity gate for a process newer than
// the recorded one.
type Gates func(iid string, old *vllm.Identity, requireNewer bool) ([]Check, vllm.Identity)

// Readmit validates a drained or blocked engine and, when every gate
// passes, returns it to placement with its new identity accepted. The
// gates do engine I/O: an owner under a lock calls BeginReadmit and
// FinishReadmit itself and runs the gates between them.
func (m *Manager) Readmit(iid string, now float64, gates Gates) (Record, error) {
	old, requireNewer, rec, err := m.BeginReadmit(iid, now)
	if err != nil {
		return rec, err
	}
	checks, seen := gates(iid, old, requireNewer)
	return m.FinishReadmit(iid, now, checks, seen)
}

// BeginReadmit checks that iid may be validated and marks it validating;
// on nil the caller runs the gates and calls FinishReadmit.
func (m *Manager) BeginReadmit(iid string, now float64) (old *vllm.Identity, requireNewer bool, rec Record, err error) {
	e := m.engines[iid]
	switch {
	case e == nil:
		return nil, false, Record{}, conflict("unknown engine(s): %s", iid)
	case e.rec.State != Drained && e.rec.State != Blocked:
		return nil, false, e.rec, conflict("%s is %s, expected drained", iid, e.rec.State)
	}
	if miss := m.missingContract(); miss != "" {
		msg := "readmission requires a complete engine_contract"
		e.rec.State, e.rec.Error = Blocked, msg
		e.rec.Checks = []Check{{Name: "missing-contract", OK: false, Detail: msg + "; " + miss}}
		m.event(now, "validation_failed", map[string]any{"iid": iid, "error": msg, "wave_id": ""})
		return nil, false, e.rec, conflict("readmission validation failed")
	}
	if e.rec.RestartRequired && e.rec.OldProcessStart == nil {
		return nil, false, e.rec, conflict("%s has no recorded pre-restart process identity", iid)
	}
	e.rec.State = Validating
	if e.identity != nil {
		id := *e.identity
		old = &id
	}
	m.event(now, "validation_started", map[string]any{"iid": iid, "wave_id": ""})
	return old, e.rec.RestartRequired, e.rec, nil
}

// FinishReadmit applies the gates' outcome.
func (m *Manager) FinishReadmit(iid string, now float64, checks []Check, seen vllm.Identity) (Record, error) {
	e := m.engines[iid]
	e.rec.Checks = checks
	var failed []string
	for _, c := range checks {
		if !c.OK {
			failed = append(failed, c.Name+": "+c.Detail)
		}
	}
	if len(failed) > 0 {
		e.rec.State, e.rec.Error = Blocked, strings.Join(failed, "; ")
		m.event(now, "validation_failed", map[string]any{"iid": iid, "error": e.rec.Error, "wave_id": ""})
		return e.rec, conflict("readmission validation failed")
	}
	start := seen.ProcessStart
	e.rec.State, e.rec.Error, e.rec.NewProcessStart = Active, "", &start
	e.identity = &seen
	e.ejected, e.cause, e.suspect = false, "", false
	clear(e.streaks)
	e.remark()
	m.clearHolds(iid) // the gates proved credential, build and a KV transfer
	m.event(now, "readmitted", map[string]any{"iid": iid, "process_start": start, "wave_id": ""})
	return e.rec, nil
}

// Records returns every engine's record, sorted by iid.
func (m *Manager) Records() []Record {
	out := make([]Record, 0, len(m.order))
	for _, iid := range m.order {
		out = append(out, m.engines[iid].rec)
	}
	return out
}

// Restore applies records saved by an earlier router: an engine that was
// not active is held out again; one that was validating is blocked, since
// its validation died with the old router.
func (m *Manager) Restore(records []Record, ejected map[string]string, starts map[string]float64) {
	for _, r := range records {
		e := m.engines[r.IID]
		if e == nil {
			continue
		}
		e.rec = r
		if e.rec.Checks == nil {
			e.rec.Checks = []Check{}
		}
		if r.State == Validating {
			e.rec.State, e.rec.Error = Blocked, "readmission validation was interrupted by router replacement"
		}
	}
	for iid, cause := range ejected {
		if e := m.engines[iid]; e != nil {
			e.ejected, e.cause, e.probeDue = true, cause, 0 // probe at once
		}
	}
	for iid, s := range starts {
		if e := m.engines[iid]; e != nil && e.identity == nil {
			e.identity = &vllm.Identity{ProcessStart: s}
		}
	}
}

// RestoreEvents keeps the events an earlier router recorded. They are
// in that router's journal already: Ready never hands them out.
func (m *Manager) RestoreEvents(ev []Event) {
	m.recorded += len(ev)
	m.handed += len(ev)
	m.events = append(append([]Event(nil), ev...), m.events...)
	if len(m.events) > maxEvents {
		m.events = m.events[len(m.events)-maxEvents:]
	}
}

// Note records an engine_lifecycle event the router observed itself (a
// process excluded, a recovery blocked).
func (m *Manager) Note(at float64, action string, fields map[string]any) {
	m.event(at, action, fields)
}
