package state

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ResumeRule names the resume compatibility rule a document failed.
type ResumeRule string

// The resume rules of runtime.md §3.7.
const (
	// RuleEngineSet: the document's engines differ from the configured set.
	RuleEngineSet ResumeRule = "engine-set"
	// RuleRestartPolicy: the document's restart policy differs from the fleet's.
	RuleRestartPolicy ResumeRule = "restart-policy"
	// RuleProcessStarts: on a contracted fleet, an engine the document
	// counts as available has no accepted process start.
	RuleProcessStarts ResumeRule = "process-starts"
)

// ResumeError says which resume rule a schema-valid document failed. The
// router decides what follows: a contracted fleet takes a whole-wave
// hold; an uncontracted fleet with a different engine set starts from the
// configured split.
type ResumeError struct {
	Rule   ResumeRule
	Detail string
}

func (e *ResumeError) Error() string {
	return "handoff cannot be resumed (" + string(e.Rule) + "): " + e.Detail
}

// ResumeCheck applies the §3.7 compatibility rules to a document that
// Read or Decode accepted: the sorted engine set and the restart policy
// must match the configuration, and on a contracted fleet every engine the
// document counts as available (not ejected, not an inference suspect, no
// non-active drain record) must have a lifecycle.process_starts entry. A
// failed rule is a *ResumeError; a document that then fails Validate
// against the configuration is a *Problem (damaged, not incompatible).
func ResumeCheck(h *Handoff, cfgEngines []string, policy string, contracted bool) error {
	cfg := slices.Sorted(slices.Values(cfgEngines))
	if !slices.Equal(h.Engines, cfg) {
		return &ResumeError{Rule: RuleEngineSet, Detail: fmt.Sprintf(
			"document engines [%s], fleet engines [%s]", strings.Join(h.Engines, " "), strings.Join(cfg, " "))}
	}
	if h.Lifecycle != nil && h.Lifecycle.EngineRestartPolicy != policy {
		return &ResumeError{Rule: RuleRestartPolicy, Detail: fmt.Sprintf(
			"document engine_restart_policy %q, fleet %q", h.Lifecycle.EngineRestartPolicy, policy)}
	}
	if err := h.Validate(cfg, policy); err != nil {
		return err
	}
	if !contracted {
		return nil
	}
	var missing []string
	for _, iid := range h.Available() {
		if _, ok := h.Lifecycle.ProcessStarts[iid]; !ok {
			missing = append(missing, iid)
		}
	}
	if len(missing) > 0 {
		return &ResumeError{Rule: RuleProcessStarts, Detail: "no lifecycle.process_starts entry for available engine(s) " +
			strings.Join(missing, ", ")}
	}
	return nil
}

// IsResumeError reports whether err is a *ResumeError and returns it.
func IsResumeError(err error) (*ResumeError, bool) {
	var r *ResumeError
	ok := errors.As(err, &r)
	return r, ok
}

// Available returns, sorted, the engines the document counts as available:
// not ejected, not held for an inference probe, and with no non-active
// drain record.
func (h *Handoff) Available() []string {
	out := []string{}
	for _, iid := range h.Engines {
		if !slices.Contains(h.Ejected, iid) && h.InferenceSources[iid] == nil && !h.Held(iid) {
			out = append(out, iid)
		}
	}
	return out
}

// Held reports whether iid has a drain record in a state other than
// active: resume drains such an engine again, so it stays out of
// placement.
func (h *Handoff) Held(iid string) bool {
	if h.Lifecycle == nil {
		return false
	}
	for _, r := range h.Lifecycle.Records {
		if r.IID == iid && r.State != StateActive {
			return true
		}
	}
	return false
}
