package state

import (
	"strings"
	"testing"
)

func TestResumeCheck(t *testing.T) {
	cfg := []string{"e2", "e0", "e1"} // unsorted on purpose: the check sorts
	cases := []struct {
		name       string
		engines    []string
		policy     string
		contracted bool
		mut        func(h *Handoff)
		rule       ResumeRule // "" for compatible
		problem    string     // a validation problem instead of a rule
	}{
		{"compatible", cfg, PolicyIndividual, true, func(h *Handoff) {}, "", ""},
		{"engine added", append(cfg, "e3"), PolicyIndividual, false, func(h *Handoff) {}, RuleEngineSet, ""},
		{"engine removed", []string{"e0", "e1"}, PolicyIndividual, false, func(h *Handoff) {}, RuleEngineSet, ""},
		{"policy differs", cfg, PolicyWholeWave, true, func(h *Handoff) {}, RuleRestartPolicy, ""},
		{"available engine without start (contracted)", cfg, PolicyIndividual, true,
			func(h *Handoff) { delete(h.Lifecycle.ProcessStarts, "e0") }, RuleProcessStarts, ""},
		{"available engine without start (uncontracted)", cfg, PolicyIndividual, false,
			func(h *Handoff) { delete(h.Lifecycle.ProcessStarts, "e0") }, "", ""},
		{"ejected engine needs no start", cfg, PolicyIndividual, true,
			func(h *Handoff) { delete(h.Lifecycle.ProcessStarts, "e1") }, "", ""},
		{"inference suspect needs no start", cfg, PolicyIndividual, true,
			func(h *Handoff) { delete(h.Lifecycle.ProcessStarts, "e2") }, "", ""},
		{"drained engine needs no start", cfg, PolicyIndividual, true, func(h *Handoff) {
			h.Ejected = nil
			delete(h.Lifecycle.ProcessStarts, "e1")
		}, "", ""},
		{"active record counts as available", cfg, PolicyIndividual, true, func(h *Handoff) {
			h.Ejected = nil
			h.Lifecycle.Records[0].State = StateActive
			delete(h.Lifecycle.ProcessStarts, "e1")
		}, RuleProcessStarts, ""},
		{"damaged document is a problem, not a rule", cfg, PolicyIndividual, true,
			func(h *Handoff) { h.Lifecycle.ProcessStarts["e0"] = -5 }, "", "field lifecycle.process_starts.e0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := fullDoc()
			tc.mut(h)
			err := ResumeCheck(h, tc.engines, tc.policy, tc.contracted)
			re, isRule := IsResumeError(err)
			switch {
			case tc.problem != "":
				if err == nil || isRule || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("error = %v, want a validation problem with %q", err, tc.problem)
				}
			case tc.rule == "":
				if err != nil {
					t.Fatalf("want compatible, got %v", err)
				}
			case !isRule || re.Rule != tc.rule:
				t.Fatalf("error = %v, want rule %s", err, tc.rule)
			}
		})
	}
}

func TestAvailable(t *testing.T) {
	h := fullDoc() // e1 ejected and drained, e2 an inference suspect
	if got := strings.Join(h.Available(), ","); got != "e0" {
		t.Errorf("Available = %s, want e0", got)
	}
}
