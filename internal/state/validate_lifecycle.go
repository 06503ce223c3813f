package state

import (
	"maps"
	"slices"
	"strconv"
)

var recordStates = map[string]bool{
	StateActive: true, StateDraining: true, StateDrained: true,
	StateDeadlineExceeded: true, StateValidating: true, StateBlocked: true,
}

// ValidPolicy reports whether p is a restart policy this build knows.
func ValidPolicy(p string) bool { return p == PolicyIndividual || p == PolicyWholeWave }

func (v validator) lifecycle(lc *Lifecycle, policy string) error {
	if lc == nil {
		return problem("lifecycle", "is missing", "the document is damaged or from another program: move it aside")
	}
	p := lc.EngineRestartPolicy
	switch {
	case !ValidPolicy(p):
		return problem("lifecycle.engine_restart_policy", "is %q, not individual or whole_wave", "use individual or whole_wave", p)
	case policy != "" && p != policy:
		return problem("lifecycle.engine_restart_policy", "is %q but the fleet sets %q", "set recovery.engine_restart_policy to match, or move the document aside", p, policy)
	case len(lc.Events) > MaxLifecycleEvents:
		return problem("lifecycle.events", "holds %d events, more than %d", "keep only the last 200", len(lc.Events), MaxLifecycleEvents)
	}
	for _, iid := range slices.Sorted(maps.Keys(lc.ProcessStarts)) {
		f := "lifecycle.process_starts." + iid
		if err := v.engine(f, iid); err != nil {
			return err
		}
		if s := lc.ProcessStarts[iid]; !finite(s) || s <= 0 {
			return problem(f, "must be a positive finite Unix time, got %v", "record the engine's process_start_time_seconds", s)
		}
	}
	for i, r := range lc.Records {
		if err := v.record("lifecycle.records["+strconv.Itoa(i)+"]", r); err != nil {
			return err
		}
	}
	return nil
}

func (v validator) record(f string, r DrainRecord) error {
	if err := v.engine(f+".iid", r.IID); err != nil {
		return err
	}
	if !recordStates[r.State] {
		return problem(f+".state", "is %q, not one of active, draining, drained, deadline_exceeded, validating, blocked", "use a drain-record state", r.State)
	}
	times := []struct {
		name string
		t    *float64
	}{{"requested_at", &r.RequestedAt}, {"deadline_at", r.DeadlineAt},
		{"old_process_start", r.OldProcessStart}, {"new_process_start", r.NewProcessStart}}
	for _, t := range times {
		if t.t != nil && (!finite(*t.t) || *t.t < 0) {
			return problem(f+"."+t.name, "must be a finite Unix time ≥ 0 or null, got %v", "record wall-clock seconds", *t.t)
		}
	}
	for j, c := range r.Checks {
		if c.Name == "" {
			return problem(f+".checks["+strconv.Itoa(j)+"].name", "is empty", "name the gate (health, attestation, …)")
		}
	}
	return nil
}
