package lifecycle

import (
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// State is an engine's lifecycle state.
type State string

// Lifecycle states (runtime.md §3.5.2).
const (
	Active           State = "active"
	Draining         State = "draining"
	Drained          State = "drained"
	DeadlineExceeded State = "deadline_exceeded"
	Validating       State = "validating"
	Blocked          State = "blocked"
)

// Check is one readmission gate's outcome.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Record is an engine's lifecycle record.
type Record struct {
	IID             string   `json:"iid"`
	State           State    `json:"state"`
	RequestedAt     *float64 `json:"requested_at"` // wall Unix seconds
	DeadlineAt      *float64 `json:"deadline_at"`
	RestartRequired bool     `json:"restart_required"`
	WaveID          string   `json:"wave_id"`
	OldProcessStart *float64 `json:"old_process_start"`
	NewProcessStart *float64 `json:"new_process_start"`
	Checks          []Check  `json:"checks"`
	Error           string   `json:"error"`
}

// engine is one engine's availability state.
type engine struct {
	iid      string
	streaks  map[Class]int
	ejected  bool
	cause    string
	probeDue int // monitor passes until the next readmission probe
	suspect  bool
	rec      Record
	identity *vllm.Identity // last accepted; nil before the first check
	until    float64        // timed quarantine ends (router seconds); 0 when not held
	// marked is set when a streak grows, and re-derived by a Success that
	// clears: while it is false there is nothing for a Success to clear,
	// so the request path need not take its owner's lock (Marked).
	marked atomic.Bool
}

// Manager is the availability state of a fleet: rules and state, no
// lock, no I/O, no clock (times come in as arguments). It is not safe
// for concurrent use: its owner serializes every call (the supervisor,
// under avail's one mutex); only Marked may be called at any time.
type Manager struct {
	cfg      fleet.Recovery
	contract *fleet.EngineContract
	engines  map[string]*engine
	order    []string
	events   []Event     // the last maxEvents recorded
	recorded int         // events ever recorded (restored ones included)
	handed   int         // of those, the ones Ready handed out
	pending  pending     // what Step produced for the next Ready (step.go)
	holds    holdState   // engines held out whatever their role coverage (holds.go)
	recorder func(Entry) // hears every Step and Ready (record.go); nil when none
}

// Event is one engine_lifecycle journal event.
type Event struct {
	At     float64        // wall Unix seconds
	Action string         // drain_started, drain_complete, readmitted, process_excluded, …
	Fields map[string]any // iid and the action's fields
}

// New builds the manager for cfg's engines, all active.
func New(cfg *fleet.Config) *Manager {
	m := &Manager{cfg: cfg.Recovery, contract: cfg.EngineContract, engines: map[string]*engine{}, holds: newHoldState()}
	for _, e := range cfg.Engines {
		m.engines[e.IID] = &engine{iid: e.IID, streaks: map[Class]int{}, rec: Record{IID: e.IID, State: Active, Checks: []Check{}}}
		m.order = append(m.order, e.IID)
	}
	sort.Strings(m.order)
	return m
}

// Live reports whether iid may take new placements: not ejected, not
// quarantined, not held (holds.go) and not held by a lifecycle action.
// This is the rule; the availability supervisor is its one reader, which
// publishes the answer into the scheduling core (everyone else asks the
// supervisor, avail.Supervisor.Usable).
func (m *Manager) Live(iid string) bool {
	e := m.engines[iid]
	return e != nil && !e.ejected && e.until == 0 && e.rec.State == Active && !m.held(iid)
}

// Quarantine holds iid out of placement until the router time until: a
// failed leg's engine rests for recovery.failure_quarantine_s. The caller
// checks that another live engine covers its role.
func (m *Manager) Quarantine(iid string, until float64) bool {
	e := m.engines[iid]
	if e == nil || e.ejected || e.until != 0 {
		return false
	}
	e.until = until
	return true
}

// ReleaseQuarantines lifts the holds that ended by now and returns them.
func (m *Manager) ReleaseQuarantines(now float64) []string {
	var out []string
	for _, iid := range m.order {
		if e := m.engines[iid]; e.until != 0 && now >= e.until {
			e.until = 0
			out = append(out, iid)
		}
	}
	return out
}

// NextRelease is the soonest moment, in seconds from now, an engine held
// out may be back: a timed hold's end, or an ejected engine's next
// readmission probe (its due passes of pass seconds each). It is a lower
// bound: a probe can fail. ok is false when no engine is held either way.
func (m *Manager) NextRelease(now, pass float64) (s float64, ok bool) {
	for _, iid := range m.order {
		e := m.engines[iid]
		at := -1.0
		switch {
		case e.until != 0:
			at = max(0, e.until-now)
		case e.ejected:
			at = float64(max(e.probeDue, 1)) * pass
		}
		if at >= 0 && (!ok || at < s) {
			s, ok = at, true
		}
	}
	return s, ok
}

// Quarantined lists the engines in a timed hold, sorted.
func (m *Manager) Quarantined() []string {
	var out []string
	for _, iid := range m.order {
		if m.engines[iid].until != 0 {
			out = append(out, iid)
		}
	}
	return out
}

// Failure records a failed leg of class c on iid and returns what to do.
func (m *Manager) Failure(iid string, c Class) Verdict {
	e := m.engines[iid]
	if e == nil || e.ejected {
		return None
	}
	e.streaks[c]++
	e.marked.Store(true)
	limit := m.cfg.EjectAfter
	if c == Liveness {
		limit = m.cfg.LivenessMisses
	}
	if e.streaks[c] < limit {
		return None
	}
	if verdictOf(c) == VerifyInference {
		e.suspect = true
	}
	return verdictOf(c)
}

// Marked reports whether a Success on iid may change anything (a streak
// or a suspicion to clear). It is safe to call concurrently with the
// owner's calls: engines is fixed at New and marked is atomic, so the
// request path asks it before taking its owner's lock.
func (m *Manager) Marked(iid string) bool {
	e := m.engines[iid]
	return e != nil && e.marked.Load()
}

// Success records a kind of success ("answered", "health", "prefill",
// "decode", "inference"), clearing the classes it proves wrong.
func (m *Manager) Success(iid, kind string) {
	e := m.engines[iid]
	if e == nil || !e.marked.Load() {
		return
	}
	for _, c := range cleared[kind] {
		e.streaks[c] = 0
	}
	if kind == "inference" {
		e.suspect = false
	}
	e.remark()
}

// remark re-derives marked after streaks or suspect changed.
func (e *engine) remark() {
	marked := e.suspect
	for _, n := range e.streaks {
		marked = marked || n != 0
	}
	e.marked.Store(marked)
}

// Eject takes iid out of placement with cause. It returns false when the
// engine already was out.
func (m *Manager) Eject(iid, cause string) bool {
	e := m.engines[iid]
	if e == nil || e.ejected {
		return false
	}
	e.ejected, e.cause, e.until = true, cause, 0 // an ejection supersedes a quarantine
	e.probeDue = m.cfg.ReadmitEvery
	return true
}

// Recovered returns an ejected engine to placement and clears its streaks.
func (m *Manager) Recovered(iid string) bool {
	e := m.engines[iid]
	if e == nil || !e.ejected {
		return false
	}
	e.ejected, e.cause, e.suspect = false, "", false
	clear(e.streaks)
	e.remark()
	return true
}

// Suspect reports whether iid awaits an inference verification.
func (m *Manager) Suspect(iid string) bool {
	e := m.engines[iid]
	return e != nil && e.suspect
}

// DueForProbe counts a monitor pass and returns the ejected engines whose
// readmission probe is due (every recovery.readmit_every passes).
func (m *Manager) DueForProbe() []string {
	var due []string
	for _, iid := range m.order {
		e := m.engines[iid]
		if !e.ejected || e.rec.State != Active {
			continue
		}
		if e.probeDue--; e.probeDue <= 0 {
			e.probeDue = m.cfg.ReadmitEvery
			due = append(due, iid)
		}
	}
	return due
}

// Ejected lists ejected engines with their causes, sorted by iid.
func (m *Manager) Ejected() map[string]string {
	out := map[string]string{}
	for _, iid := range m.order {
		if e := m.engines[iid]; e.ejected {
			out[iid] = e.cause
		}
	}
	return out
}

// Streaks returns each engine's current streak per class.
func (m *Manager) Streaks() map[string]map[Class]int {
	out := map[string]map[Class]int{}
	for _, iid := range m.order {
		s := map[Class]int{}
		for _, c := range Classes {
			s[c] = m.engines[iid].streaks[c]
		}
		out[iid] = s
	}
	return out
}

// CheckIdentity compares an observed identity with the accepted one. The
// first observation is accepted. A different version or process start is
// a new process: the caller ejects it with cause process_identity. A zero
// process start (vLLM omits the gauge with several API server processes)
// compares on the version alone.
func (m *Manager) CheckIdentity(iid string, seen vllm.Identity) (changed bool, previous vllm.Identity) {
	e := m.engines[iid]
	if e == nil {
		return false, vllm.Identity{}
	}
	if e.identity == nil {
		id := seen
		e.identity = &id
		return false, seen
	}
	prev := *e.identity
	startChanged := seen.ProcessStart > 0 && prev.ProcessStart > 0 && !vllm.SameStart(seen.ProcessStart, prev.ProcessStart)
	versionChanged := prev.Version != "" && !vllm.SameBuild(seen.Version, prev.Version) // "" after a restore: unknown
	return versionChanged || startChanged, prev
}

// AcceptIdentity records the identity a validation accepted.
func (m *Manager) AcceptIdentity(iid string, id vllm.Identity) {
	if e := m.engines[iid]; e != nil {
		e.identity = &id
	}
}

// ProcessStarts is the accepted process start per engine (those known).
func (m *Manager) ProcessStarts() map[string]float64 {
	out := map[string]float64{}
	for iid, e := range m.engines {
		if e.identity != nil && e.identity.ProcessStart > 0 {
			out[iid] = e.identity.ProcessStart
		}
	}
	return out
}

// Contracted reports whether the fleet has a complete engine contract,
// which lifecycle drain and readmission require.
func (m *Manager) missingContract() string {
	if m.contract == nil {
		return "engine_contract is absent"
	}
	if miss := m.contract.Missing(); len(miss) > 0 {
		return fmt.Sprintf("missing: %v", miss)
	}
	return ""
}
