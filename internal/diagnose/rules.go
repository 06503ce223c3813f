package diagnose

import (
	"fmt"
	"slices"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Remediation rules (ADR-006 §9; reference/evidence.md §2.11.5, §2.13):
// one deterministic rule per failure family computes corrected launch
// plans from the diagnosis's typed facts, the operator's plan, the GPU and
// — when the operator gives a model directory — the memory calculator.
// A rule never fills a value it could not compute: it answers with what
// it needs instead. Every correction states its trade-offs and the fleet
// requirements it would violate, and corrections are ranked by that cost.

// RuleStatus is a rule's standing (§2.11.5). Every rule starts as a
// hypothesis; only a scoped corrected-boot record promotes it, and that
// promotion is derived from the store (RuleStatusFor), never written here.
type RuleStatus string

// Rule statuses.
const (
	RuleHypothesis        RuleStatus = "hypothesis"
	RuleMechanismVerified RuleStatus = "mechanism_verified"
)

// RuleID names a rule.
type RuleID string

// Rule is one family's correction strategy.
type Rule struct {
	ID       RuleID `json:"id"`
	Family   Family `json:"family"`
	Version  int    `json:"version"`
	Strategy string `json:"strategy"` // what it computes, in one sentence
	compute  func(*ruleCtx)
}

// RuleRef names the rule a remedy came from, with its status for the
// engine minor the remedy is about and its fingerprint.
type RuleRef struct {
	ID          RuleID     `json:"id"`
	Family      Family     `json:"family"`
	Version     int        `json:"version"`
	Status      RuleStatus `json:"status"`
	Fingerprint string     `json:"fingerprint"`
}

// Fingerprint is the digest of the rule's identity (id, family, version).
func (r Rule) Fingerprint() string {
	_, d, err := canon.MarshalDigest(struct {
		ID      RuleID `json:"id"`
		Family  Family `json:"family"`
		Version int    `json:"version"`
	}{r.ID, r.Family, r.Version})
	if err != nil {
		panic(fmt.Sprintf("diagnose: rule %s: %v", r.ID, err)) // static data: a programming error
	}
	return d
}

// Ref is the rule's reference at hypothesis status.
func (r Rule) Ref() RuleRef {
	return RuleRef{ID: r.ID, Family: r.Family, Version: r.Version, Status: RuleHypothesis, Fingerprint: r.Fingerprint()}
}

// Rules lists every rule in taxonomy order.
func Rules() []Rule { return slices.Clone(ruleTable) }

// RuleFor returns the rule of a family (false for unrecognized).
func RuleFor(f Family) (Rule, bool) {
	for _, r := range ruleTable {
		if r.Family == f {
			return r, true
		}
	}
	return Rule{}, false
}

// NeedKind says what a rule lacked to compute a value.
type NeedKind string

// Need kinds.
const (
	NeedFact           NeedKind = "log_fact"        // the log did not state a figure the rule needs
	NeedModelDir       NeedKind = "model_dir"       // the memory calculator (a model directory) is needed
	NeedGPU            NeedKind = "gpu"             // the GPU's memory or compute capability (--gpu)
	NeedPlan           NeedKind = "plan"            // the operator's launch plan (--plan)
	NeedFleet          NeedKind = "fleet"           // the fleet document (--fleet)
	NeedOperatorChoice NeedKind = "operator_choice" // a value only the operator can choose
	NeedCredential     NeedKind = "credential"      // access the plan cannot grant
	NeedRootCause      NeedKind = "root_cause"      // the log does not show the cause
)

// Need is one thing a rule needed and did not have.
type Need struct {
	Kind NeedKind `json:"kind"`
	What string   `json:"what"` // the fact or input, e.g. "kv_needed_bytes"
	Why  string   `json:"why"`
}

// ActionKind is an operator step outside the launch plan.
type ActionKind string

// Action kinds.
const (
	ActionChoosePort        ActionKind = "choose_port"
	ActionCredential        ActionKind = "credential"
	ActionAlignVersions     ActionKind = "align_versions"
	ActionDifferentArtifact ActionKind = "different_artifact"
	ActionFreeGPU           ActionKind = "free_gpu"
	ActionNetwork           ActionKind = "network"
	ActionEngineVersion     ActionKind = "engine_version"
	ActionChatTemplate      ActionKind = "chat_template"
	ActionHostMemory        ActionKind = "host_memory"
	ActionRootCause         ActionKind = "root_cause"
)

// Action is a step the operator takes that no plan field expresses. Its
// text is written by the rule from typed values, never copied from a log.
type Action struct {
	Kind ActionKind `json:"kind"`
	Text string     `json:"text"`
}

// Remedy is a rule's answer for one diagnosis.
type Remedy struct {
	Family Family  `json:"family"`
	Rule   RuleRef `json:"rule"` // zero for an unrecognized failure
	// Base is the broken plan the corrections are diffs against: the
	// operator's plan with fields it left unset filled from the log's typed
	// facts.
	Base        plan.Plan    `json:"base"`
	Corrections []Correction `json:"corrections"` // ranked, least costly first
	Actions     []Action     `json:"actions"`
	Needs       []Need       `json:"needs"`
	Notes       []string     `json:"notes"`
}

// Input is what a remedy is computed from besides the diagnosis. Every
// field is optional; a rule that lacks one says so in Remedy.Needs.
type Input struct {
	// Plan is the operator's broken launch plan (--plan, or plan.FromFleet).
	Plan *plan.Plan
	// GPU is the device (--gpu via memory.LookupGPU and HardwareFor); when
	// nil, the log's GPU key and figures are used.
	GPU *memory.HardwareSpec
	// Model is the calculator input for the model directory (planner),
	// when the operator gave one.
	Model *memory.PlanInput
	// Requirements are the accepted fleet requirements (FleetRequirements).
	Requirements Requirements
}

// Remediate computes the remedy for a diagnosis. It is deterministic and
// fails only on an invalid operator plan.
func Remediate(d Diagnosis, in Input) (Remedy, error) {
	rem := Remedy{Family: d.Family, Corrections: []Correction{}, Actions: []Action{}, Needs: []Need{}, Notes: []string{}}
	if in.Plan != nil {
		if err := in.Plan.Validate(); err != nil {
			return Remedy{}, fmt.Errorf("--plan: %w", err)
		}
	}
	rule, ok := RuleFor(d.Family)
	if !ok {
		rem.Base = basePlan(d.Facts, in.Plan, &rem)
		rem.Needs = append(rem.Needs, Need{Kind: NeedRootCause, What: "a recognized failure",
			Why: "the failure is unrecognized: no rule applies, so no correction is computed; the sanitized facts are kept"})
		return rem, nil
	}
	c := newRuleCtx(d, in, &rem)
	rem.Rule = rule.Ref()
	rule.compute(c)
	c.finish()
	return rem, nil
}

// FleetRequirements are the requirements a fleet document states: its SLO,
// the artifact it pins (its model), the tensor-parallel size of its
// hardware block and the dtypes and versions of its engine contract.
// needMaxModelLen is the context the fleet needs (0 when not stated: the
// fleet document has no such field, so the operator states it).
func FleetRequirements(cfg *fleet.Config, needMaxModelLen int64) Requirements {
	r := Requirements{Source: RequirementsNone, MaxModelLen: needMaxModelLen}
	if cfg == nil {
		return r
	}
	r.Source = RequirementsFleet
	r.SLO = &SLO{TTFTSeconds: cfg.SLO.TTFT, TPOTSeconds: cfg.SLO.TPOT}
	r.ArtifactPinned = cfg.Model != ""
	if cfg.Hardware != nil {
		r.TensorParallel = cfg.Hardware.TensorParallel
	}
	if k := cfg.EngineContract; k != nil {
		r.Contract = &ContractPins{VLLMVersion: k.VLLMVersion, NIXLConnectorVersion: k.NIXLConnectorVersion, ImageDigest: k.ImageDigest}
		if d, ok := plan.ParseDType(k.ModelDtype); ok {
			r.Contract.ModelDType = d
		}
		if kv, ok := plan.ParseKVCacheDType(k.KVCacheDtype); ok {
			r.Contract.KVCacheDType = kv
		}
	}
	return r
}
