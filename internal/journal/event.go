package journal

import (
	"fmt"
	"time"
)

// Event is an event row of runtime.md §4.2: a name, a time and its own
// fields. At is on the router's monotonic clock (seconds) except for
// engine_lifecycle, whose At is wall-clock Unix seconds. Fields must not
// reuse the envelope keys (schema, schema_version, run, event, at).
type Event struct {
	Name   string
	At     float64
	Fields map[string]any
}

// Event names the router writes.
const (
	EventControllerDecision     = "controller_decision"
	EventEngineEjected          = "engine_ejected"
	EventEngineReadmitted       = "engine_readmitted"
	EventEngineLifecycle        = "engine_lifecycle"
	EventEngineHoldStarted      = "engine_hold_started"
	EventEngineHoldEnded        = "engine_hold_ended"
	EventMonitoringStageFailure = "monitoring_stage_failure"
	EventMonitoringDegraded     = "monitoring_degraded"
	EventMonitoringRecovered    = "monitoring_recovered"
	EventDecodeFloorRestored    = "decode_floor_restored"
	EventBelowFloor             = "below_floor"
	EventBelowFloorRecovered    = "below_floor_recovered"
)

// reservedKeys are the envelope keys an event's Fields may not set.
func reservedKeys() []string { return []string{"schema", "schema_version", "run", "event", "at"} }

func (e Event) validate() error {
	if e.Name == "" {
		return fmt.Errorf("journal event: empty name; use one of the Event* constants")
	}
	for _, k := range reservedKeys() {
		if _, ok := e.Fields[k]; ok {
			return fmt.Errorf("journal event %s: field %q is part of the row envelope; rename it", e.Name, k)
		}
	}
	return nil
}

// Decision is a controller evaluation as journalled (§2.7.1 step 8):
// the proposed split, who decided, why, and the outcome. Details carries
// the optional last_decision keys of §5.5 (current_prefill, objective, …).
type Decision struct {
	Prefill int
	Decode  int
	By      string // reactive, decode_floor, floor_recovery, …
	Reason  string
	Result  string // applied, held, blocked, advisory
	Applied bool
	Details map[string]any
}

// ControllerDecision is the controller_decision event at monotonic time at.
func ControllerDecision(at float64, d Decision) Event {
	f := make(map[string]any, len(d.Details)+6)
	for k, v := range d.Details {
		f[k] = v
	}
	f["prefill"], f["decode"], f["by"] = d.Prefill, d.Decode, d.By
	f["reason"], f["result"], f["applied"] = d.Reason, d.Result, d.Applied
	return Event{Name: EventControllerDecision, At: at, Fields: f}
}

// EngineEjected is the engine_ejected event: iid left the live set for cause.
func EngineEjected(at float64, iid, cause string) Event {
	return Event{Name: EventEngineEjected, At: at, Fields: map[string]any{"iid": iid, "cause": cause}}
}

// EngineReadmitted is the engine_readmitted event: iid is live again on
// the given evidence (e.g. probe, health, lifecycle).
func EngineReadmitted(at float64, iid, evidence string) Event {
	return Event{Name: EventEngineReadmitted, At: at, Fields: map[string]any{"iid": iid, "evidence": evidence}}
}

// EngineLifecycle is an engine_lifecycle event. Unlike the other events
// its time is the wall clock (§0.3), so operators can line it up with
// deployment tooling; fields are the per-action fields of §4.2 (iid,
// wave_id, error, …).
func EngineLifecycle(wall time.Time, action string, fields map[string]any) Event {
	f := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		f[k] = v
	}
	f["action"] = action
	return Event{Name: EventEngineLifecycle, At: unixSeconds(wall), Fields: f}
}

// unixSeconds is t as fractional Unix seconds, microsecond resolution.
func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }
