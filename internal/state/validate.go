package state

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Validate checks h against the fleet it will be applied to or served
// for (runtime.md §3.7, "validation on read"): the exact schema and
// version, epoch ≥ 0, a lifecycle section with a valid restart policy,
// process_starts naming configured engines with positive finite starts,
// inference_sources naming configured suspects with non-empty lists of
// configured producers or "" (local probe), roles naming configured
// engines with prefill or decode, known drain-record states.
//
// engines is the configured engine set; policy is the configured restart
// policy, or "" to accept either valid policy. Whether the document's own
// engine set equals the configured one is ResumeCheck's question, because
// the router answers it with a fallback rather than an error.
func (h *Handoff) Validate(engines []string, policy string) error {
	return h.validate(engines, policy, "")
}

// validate returns the first problem, stamped with file when non-empty.
func (h *Handoff) validate(engines []string, policy, file string) error {
	known := make(map[string]bool, len(engines))
	for _, e := range engines {
		known[e] = true
	}
	v := validator{known: known}
	for _, check := range []func(*Handoff) error{
		v.header, v.engineList, v.roles, v.ejected, v.inferenceSources,
		v.counters, v.reasons, v.demandRisk,
		func(h *Handoff) error { return v.lifecycle(h.Lifecycle, policy) },
	} {
		if err := check(h); err != nil {
			if file != "" {
				return withFile(err, file)
			}
			return err
		}
	}
	return nil
}

type validator struct{ known map[string]bool }

const fixEngines = "the fleet's engines changed since this document was written: resume without it (move it aside) or restore the engines"

func (v validator) header(h *Handoff) error {
	switch {
	case h.Schema != HandoffSchema:
		return problem("schema", "is %q, not %q", "this is not a narwhal handoff document", h.Schema, HandoffSchema)
	case h.SchemaVersion != HandoffSchemaVersion:
		return &VersionError{Version: strconv.Itoa(h.SchemaVersion)}
	case !finite(h.At) || h.At < 0:
		return problem("at", "must be wall-clock Unix seconds (finite, ≥ 0), got %v", "write it from the clock", h.At)
	case h.RunAt != nil && (!finite(*h.RunAt) || *h.RunAt < 0):
		return problem("run_at", "must be seconds on the run's clock (finite, ≥ 0), got %v", "write it from the router's clock, or leave it out", *h.RunAt)
	case h.Epoch < 0:
		return problem("epoch", "must be an integer ≥ 0, got %d", "use the lease epoch, or 0 without a lease", h.Epoch)
	case (h.Epoch == 0) != (h.Holder == ""):
		return problem("holder", "is %q with epoch %d; a lease holder and a positive epoch go together", "use both from the lease, or 0 and \"\" without one", h.Holder, h.Epoch)
	}
	return nil
}

func (v validator) engineList(h *Handoff) error {
	for i, e := range h.Engines {
		if e == "" {
			return problem("engines["+strconv.Itoa(i)+"]", "is empty", "name every engine by its iid")
		}
		if i > 0 && h.Engines[i-1] >= e {
			return problem("engines", "must be sorted and unique (%q then %q)", "sort the engine iids", h.Engines[i-1], e)
		}
	}
	return nil
}

func (v validator) engine(field, iid string) error {
	if !v.known[iid] {
		return problem(field, "names engine %q, which the fleet does not configure", fixEngines, iid)
	}
	return nil
}

func (v validator) roles(h *Handoff) error {
	for _, iid := range slices.Sorted(maps.Keys(h.Roles)) {
		if err := v.engine("roles."+iid, iid); err != nil {
			return err
		}
		if r := h.Roles[iid]; r != fleet.Prefill && r != fleet.Decode {
			return problem("roles."+iid, "is %q, not prefill or decode", "use prefill or decode", r)
		}
	}
	return nil
}

func (v validator) ejected(h *Handoff) error {
	seen := map[string]bool{}
	for i, iid := range h.Ejected {
		f := "ejected[" + strconv.Itoa(i) + "]"
		if err := v.engine(f, iid); err != nil {
			return err
		}
		if seen[iid] {
			return problem(f, "repeats %q", "list each ejected engine once", iid)
		}
		seen[iid] = true
	}
	return nil
}

func (v validator) inferenceSources(h *Handoff) error {
	for _, iid := range slices.Sorted(maps.Keys(h.InferenceSources)) {
		f := "inference_sources." + iid
		if err := v.engine(f, iid); err != nil {
			return err
		}
		srcs := h.InferenceSources[iid]
		if len(srcs) == 0 {
			return problem(f, "is empty", "list the producer iids, or \"\" for a local probe")
		}
		for i, p := range srcs {
			if p == "" {
				continue
			}
			if err := v.engine(f+"["+strconv.Itoa(i)+"]", p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (v validator) counters(h *Handoff) error {
	c := h.Counters
	for _, n := range []struct {
		name string
		v    int64
	}{{"offered", c.Offered}, {"unsized_offered", c.UnsizedOffered}, {"served", c.Served},
		{"slo_met", c.SLOMet}, {"expired", c.Expired}, {"invalid_requests", c.InvalidRequests},
		{"failed", c.Failed}, {"refused", c.Refused}, {"rejected", c.Rejected},
		{"cancelled", c.Cancelled}, {"unserved", c.Unserved}} {
		if n.v < 0 {
			return problem("counters."+n.name, "is %d; counters are ≥ 0", "the document is damaged: move it aside", n.v)
		}
	}
	return nil
}

func (v validator) reasons(h *Handoff) error {
	r := h.OutcomeReasons
	for _, g := range []struct {
		name string
		m    map[string]int64
	}{{"failed", r.Failed}, {"refused", r.Refused}, {"rejected", r.Rejected}, {"expired", r.Expired}} {
		for _, k := range slices.Sorted(maps.Keys(g.m)) {
			f := "outcome_reasons." + g.name + "." + k
			if k == "" {
				return problem("outcome_reasons."+g.name, "has an empty reason", "name every reason")
			}
			if g.m[k] < 0 {
				return problem(f, "is %d; counts are ≥ 0", "the document is damaged: move it aside", g.m[k])
			}
		}
	}
	return nil
}

func (v validator) demandRisk(h *Handoff) error {
	d := h.DemandRisk
	if d == nil {
		return nil
	}
	switch {
	case d.Kind == "":
		return problem("demand_risk.kind", "is empty", "name the risk kind, or write demand_risk null")
	case !finite(d.AgeS) || d.AgeS < 0:
		return problem("demand_risk.age_s", "must be finite and ≥ 0, got %v", "write the age in seconds", d.AgeS)
	}
	for _, k := range slices.Sorted(maps.Keys(d.Events)) {
		if d.Events[k] < 0 {
			return problem("demand_risk.events."+k, "is %d; counts are ≥ 0", "the document is damaged: move it aside", d.Events[k])
		}
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
