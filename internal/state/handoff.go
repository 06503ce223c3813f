package state

import (
	"encoding/json"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Handoff document identity.
const (
	HandoffSchema        = "narwhal.handoff"
	HandoffSchemaVersion = 1
	// MaxLifecycleEvents bounds lifecycle.events (the last ≤ 200 rows).
	MaxLifecycleEvents = 200
)

// Restart policies (recovery.engine_restart_policy).
const (
	PolicyIndividual = "individual"
	PolicyWholeWave  = "whole_wave"
)

// Drain record states (runtime.md §3.5.2).
const (
	StateActive           = "active"
	StateDraining         = "draining"
	StateDrained          = "drained"
	StateDeadlineExceeded = "deadline_exceeded"
	StateValidating       = "validating"
	StateBlocked          = "blocked"
)

// Handoff is narwhal.handoff v1 (runtime.md §3.7), field for field. There
// is deliberately no lifecycle_blocked field: see docs/state.md ("What is
// not in the document") for why the whole-wave hold survives without it.
type Handoff struct {
	Schema        string  `json:"schema"`
	SchemaVersion int     `json:"schema_version"`
	At            float64 `json:"at"` // wall-clock Unix seconds
	Run           string  `json:"run"`
	// RunAt is when the document was taken, on run's monotonic clock (the
	// journal's arrived scale). Resume uses it to count the journal rows
	// the counters do not hold yet. Absent in documents of older builds.
	RunAt            *float64              `json:"run_at,omitempty"`
	Model            string                `json:"model"`
	Epoch            int                   `json:"epoch"`  // lease epoch, 0 without a lease
	Holder           string                `json:"holder"` // lease holder token, "" without a lease
	Engines          []string              `json:"engines"`
	Roles            map[string]fleet.Role `json:"roles"`
	Ejected          []string              `json:"ejected"`
	InferenceSources map[string][]string   `json:"inference_sources"` // suspect → producers or "" (local probe)
	Counters         Counters              `json:"counters"`
	OutcomeReasons   OutcomeReasons        `json:"outcome_reasons"`
	Lifecycle        *Lifecycle            `json:"lifecycle"` // required; a pointer so absence is detectable
	DemandRisk       *DemandRisk           `json:"demand_risk"`
}

// Counters are the request counters restored on resume (runtime.md §5.5).
type Counters struct {
	Offered         int64 `json:"offered"`
	UnsizedOffered  int64 `json:"unsized_offered"`
	Served          int64 `json:"served"`
	SLOMet          int64 `json:"slo_met"`
	Expired         int64 `json:"expired"`
	InvalidRequests int64 `json:"invalid_requests"`
	Failed          int64 `json:"failed"`
	Refused         int64 `json:"refused"`
	Rejected        int64 `json:"rejected"`
	Cancelled       int64 `json:"cancelled"`
	Unserved        int64 `json:"unserved"`
}

// OutcomeReasons counts terminal outcomes by reason.
type OutcomeReasons struct {
	Failed   map[string]int64 `json:"failed"`
	Refused  map[string]int64 `json:"refused"`
	Rejected map[string]int64 `json:"rejected"`
	Expired  map[string]int64 `json:"expired"`
}

// Lifecycle is the engine lifecycle state that survives a restart.
type Lifecycle struct {
	WaveID              string             `json:"wave_id"`
	Records             []DrainRecord      `json:"records"`
	Events              []map[string]any   `json:"events"` // engine_lifecycle rows, opaque here
	EngineRestartPolicy string             `json:"engine_restart_policy"`
	ProcessStarts       map[string]float64 `json:"process_starts"` // iid → last accepted start, Unix seconds
}

// DrainRecord is one engine's lifecycle record (runtime.md §3.5.2). Times
// are wall-clock Unix seconds; the nullable ones are pointers.
type DrainRecord struct {
	IID             string   `json:"iid"`
	State           string   `json:"state"`
	RequestedAt     float64  `json:"requested_at"`
	DeadlineAt      *float64 `json:"deadline_at"`
	RestartRequired bool     `json:"restart_required"`
	WaveID          string   `json:"wave_id"`
	OldProcessStart *float64 `json:"old_process_start"`
	NewProcessStart *float64 `json:"new_process_start"`
	Error           string   `json:"error"`
	Checks          []Check  `json:"checks"`
}

// Check is one readmission gate result.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// DemandRisk is the pending demand-risk evidence (runtime.md §2.7.4).
type DemandRisk struct {
	Kind   string         `json:"kind"`
	AgeS   float64        `json:"age_s"`
	Events map[string]int `json:"events"`
}

// Encode validates h against its own engines and policy and returns the
// JSON that Write stores and GET /narwhal/handoff serves. Nil maps and
// slices are written as {} and [], never null, so readers see one shape.
func Encode(h *Handoff) ([]byte, error) {
	if h == nil {
		return nil, problem("", "", "document is nil", "build it from the router state")
	}
	if err := h.validate(h.Engines, "", ""); err != nil {
		return nil, err
	}
	return json.MarshalIndent(h.normalized(), "", "  ")
}

// normalized returns a shallow copy with empty containers instead of nil;
// h itself is not touched, so concurrent writers of one value do not race.
func (h *Handoff) normalized() *Handoff {
	c := *h
	c.Engines = orEmpty(c.Engines)
	c.Ejected = orEmpty(c.Ejected)
	c.Roles = orEmptyMap(c.Roles)
	c.InferenceSources = orEmptyMap(c.InferenceSources)
	c.OutcomeReasons.Failed = orEmptyMap(c.OutcomeReasons.Failed)
	c.OutcomeReasons.Refused = orEmptyMap(c.OutcomeReasons.Refused)
	c.OutcomeReasons.Rejected = orEmptyMap(c.OutcomeReasons.Rejected)
	c.OutcomeReasons.Expired = orEmptyMap(c.OutcomeReasons.Expired)
	lc := *h.Lifecycle
	lc.Events = orEmpty(lc.Events)
	lc.ProcessStarts = orEmptyMap(lc.ProcessStarts)
	lc.Records = make([]DrainRecord, len(h.Lifecycle.Records))
	for i, r := range h.Lifecycle.Records {
		r.Checks = orEmpty(r.Checks)
		lc.Records[i] = r
	}
	c.Lifecycle = &lc
	if c.DemandRisk != nil {
		d := *c.DemandRisk
		d.Events = orEmptyMap(d.Events)
		c.DemandRisk = &d
	}
	return &c
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func orEmptyMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}
