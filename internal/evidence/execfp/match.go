package execfp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
)

// The measurement boundary (ADR-006; reference/evidence.md §2.9.3): a
// prior measurement counts for the current execution only when both
// fingerprints are complete and equal, and even then it is shown as
// matching prior measurement evidence — with its freshness and its own
// observed_at — never as a new execution. Any other reuse (same class,
// another GPU, another backend, an incomplete stack) is a prediction that
// cites the prior record as its source and carries a safety margin.

// Reuse is how a prior measurement may be used for the current execution.
type Reuse string

// Reuse classes.
const (
	ExactPriorMeasurement Reuse = "exact_prior_measurement"
	PredictionOnly        Reuse = "prediction_only"
)

// Display labels. A prior measurement is never labelled as measured now.
const (
	LabelMatchingPrior = "matching prior measurement evidence"
	LabelPrediction    = "prediction informed by measurements of other executions"
)

// SubjectExecution is the subject key under which a measurement record
// names the execution fingerprint it belongs to.
const SubjectExecution = "execution"

// Prior is a stored measurement and the fingerprint input of the execution
// that produced it.
type Prior struct {
	Record evidence.Record
	Input  Input
}

// Policy is what Match needs besides the two executions: the freshness
// snapshot (clock reading, release and advisory indexes, deployed engine)
// and the safety margin a prediction from another execution must carry, a
// fraction in (0, 1] (policy, not a measured figure).
type Policy struct {
	Freshness    evidence.FreshnessInput
	SafetyMargin float64
}

// Result says how a prior measurement may be shown for the current
// execution. Every field is always present; lists are sorted.
type Result struct {
	Reuse              Reuse                    `json:"reuse"`
	Label              string                   `json:"label"`
	EpistemicStatus    evidence.EpistemicStatus `json:"epistemic_status"` // measured for an exact prior, predicted otherwise
	PriorRecord        string                   `json:"prior_record"`     // digest of the prior record
	PriorFingerprint   string                   `json:"prior_fingerprint"`
	CurrentFingerprint string                   `json:"current_fingerprint"`
	ObservedAt         string                   `json:"observed_at"` // the prior's own observation time
	Freshness          evidence.State           `json:"freshness"`
	FreshnessReason    string                   `json:"freshness_reason"`
	Differences        []string                 `json:"differences"`    // identity parts that differ
	Incomplete         []string                 `json:"incomplete"`     // "prior:<part>" / "current:<part>" not known
	SourceLineage      []string                 `json:"source_lineage"` // records a prediction draws on
	SafetyMargin       *float64                 `json:"safety_margin"`  // predictions only
}

// Classify is the bare boundary rule: exact_prior_measurement only for
// equal, complete fingerprints; anything else (including an input that
// does not normalize) is prediction_only.
func Classify(prior, current Input) Reuse {
	pf, p, err := Fingerprint(prior)
	if err != nil {
		return PredictionOnly
	}
	cf, c, err := Fingerprint(current)
	if err != nil || !Complete(p) || !Complete(c) || pf != cf {
		return PredictionOnly
	}
	return ExactPriorMeasurement
}

// Match applies the boundary to a stored measurement. It fails when the
// prior record is not a valid measurement of the execution prior.Input
// describes, or when a prediction is due and the policy has no safety
// margin.
func Match(prior Prior, current Input, pol Policy) (Result, error) {
	pf, p, err := Fingerprint(prior.Input)
	if err != nil {
		return Result{}, fmt.Errorf("prior execution: %w", err)
	}
	cf, c, err := Fingerprint(current)
	if err != nil {
		return Result{}, fmt.Errorf("current execution: %w", err)
	}
	digest, err := prior.Record.Digest()
	if err != nil {
		return Result{}, fmt.Errorf("prior record: %w", err)
	}
	if prior.Record.EpistemicStatus != evidence.Measured {
		return Result{}, fmt.Errorf("prior record %s is %s, not a measurement: only measurements have an execution to match", digest, prior.Record.EpistemicStatus)
	}
	if got := prior.Record.Subject[SubjectExecution]; got != pf {
		return Result{}, fmt.Errorf("prior record %s names execution %q, not %s: record the fingerprint of the execution that produced it under subject %q", digest, got, pf, SubjectExecution)
	}
	r := Result{
		PriorRecord: digest, PriorFingerprint: pf, CurrentFingerprint: cf,
		ObservedAt: prior.Record.ObservedAt, Differences: differences(p, c), Incomplete: incomplete(p, c),
		SourceLineage: []string{},
	}
	if Complete(p) && Complete(c) && pf == cf {
		f := evidence.Evaluate(prior.Record, pol.Freshness)
		r.Reuse, r.Label, r.EpistemicStatus = ExactPriorMeasurement, LabelMatchingPrior, evidence.Measured
		r.Freshness, r.FreshnessReason = f.State, f.Reason
		return r, nil
	}
	if !(pol.SafetyMargin > 0 && pol.SafetyMargin <= 1) {
		return Result{}, fmt.Errorf("execution %s differs from the prior's (%s): a prediction needs Policy.SafetyMargin in (0, 1], got %v", cf, r.why(), pol.SafetyMargin)
	}
	m := pol.SafetyMargin
	r.Reuse, r.Label, r.EpistemicStatus = PredictionOnly, LabelPrediction, evidence.Predicted
	r.SourceLineage, r.SafetyMargin = []string{digest}, &m
	r.Freshness, r.FreshnessReason = evidence.Unknown, "not applicable: a prediction, not reused evidence"
	return r, nil
}

// why summarizes the first reason the executions are not an exact match.
func (r Result) why() string {
	switch {
	case len(r.Incomplete) > 0:
		return "incomplete: " + r.Incomplete[0]
	case len(r.Differences) > 0:
		return "differs in " + r.Differences[0]
	}
	return "fingerprints differ"
}

func incomplete(p, c Input) []string {
	out := []string{}
	for _, m := range p.MissingFields {
		out = append(out, "prior:"+m)
	}
	for _, m := range c.MissingFields {
		out = append(out, "current:"+m)
	}
	sort.Strings(out)
	return out
}

// differences lists the identity paths (dotted json names) whose values
// differ between two normalized inputs; lists and maps compare whole.
func differences(a, b Input) []string {
	fa, fb := flatten(a), flatten(b)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	out := []string{}
	for k := range keys {
		if k == "missing_fields" || k == "schema" {
			continue
		}
		if !bytes.Equal(fa[k], fb[k]) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// flatten maps each leaf path of the identity projection to its canonical
// bytes. Objects are descended into except maps (allocator_env,
// other_flags), which are leaves like arrays.
func flatten(in Input) map[string][]byte {
	b, err := canon.Marshal(evidence.IdentityProjection(in))
	if err != nil {
		return map[string][]byte{}
	}
	var tree map[string]any
	if json.Unmarshal(b, &tree) != nil {
		return map[string][]byte{}
	}
	out := map[string][]byte{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok && prefix != "allocator_env" && prefix != "engine_config.other_flags" {
			for k, e := range m {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, e)
			}
			return
		}
		leaf, _ := canon.Marshal(v)
		out[prefix] = leaf
	}
	walk("", tree)
	return out
}
