package evidence

import (
	"fmt"
	"sort"
)

// Tier is an output tier (ADR-006 §4, ADR-011). It is always derived from
// the records present, never asserted by a producer.
type Tier string

const (
	TierNone            Tier = "none"
	Candidate           Tier = "candidate"
	Conservative        Tier = "conservative"
	RecommendedEndpoint Tier = "recommended_endpoint"
	QualifiedSolution   Tier = "qualified_solution"
)

// Requirement is a typed reason the next tier was not reached.
type Requirement string

const (
	NeedFittingPrediction    Requirement = "no_fitting_prediction"
	NeedMargin               Requirement = "margin_below_stated"
	NeedBootSameHardware     Requirement = "no_boot_same_hardware_class"
	NeedBootCurrentEngine    Requirement = "no_fresh_boot_at_current_engine"
	NeedServing              Requirement = "serving_not_verified"
	NeedTask                 Requirement = "no_task_evidence"
	NeedAcceptedRequest      Requirement = "no_accepted_request"
	NeedUncontested          Requirement = "evidence_contested"
	NeedExactReproduction    Requirement = "no_exact_solution_reproduction"
	NeedEveryServingRequired Requirement = "serving_constraint_unmet"
	// NeedSameFingerprint: the endpoint's evidence was made on an
	// execution fingerprint the engine no longer runs (tierd adds it).
	NeedSameFingerprint Requirement = "fingerprint_changed"
)

// TierQuery names what a tier is asked for.
type TierQuery struct {
	Artifact      string  // artifact identity the plan uses
	HardwareClass string  // vendor/product/memory/capability/devices
	Endpoint      string  // endpoint fingerprint
	Application   string  // application fingerprint
	Solution      string  // exact retained solution, for qualified
	MarginBytes   float64 // the stated margin conservative needs
	// ServingConstraints are the claim quantities every applicable SLO
	// needs (for example "ttft_p99_ms"); qualified needs each one met.
	ServingConstraints []string
	Freshness          FreshnessInput
}

// Decision is a derived tier with its basis and what is missing.
type Decision struct {
	Tier        Tier
	Basis       []string // digests of the records that establish the tier
	Missing     []Requirement
	Contested   []string // conflict keys that blocked a tier
	Stale       []string // basis records shown as stale, with the reason
	MarginBytes float64
	// Notes explain the decision in words (for example "fingerprint
	// changed: …"); set by callers that know more than the records.
	Notes []string
}

// Derive computes the tier for q from records. Each tier needs the one
// below it; the first unmet tier's requirements are reported in Missing.
func Derive(records []Record, q TierQuery) (Decision, error) {
	ev, err := newEvidenceView(records, q)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Tier: TierNone, MarginBytes: q.MarginBytes}
	steps := []struct {
		tier Tier
		need func(*evidenceView, *Decision) []Requirement
	}{
		{Candidate, needCandidate},
		{Conservative, needConservative},
		{RecommendedEndpoint, needRecommended},
		{QualifiedSolution, needQualified},
	}
	for _, s := range steps {
		if missing := s.need(ev, &d); len(missing) > 0 {
			d.Missing = missing
			break
		}
		d.Tier = s.tier
	}
	sort.Strings(d.Basis)
	d.Basis = dedupe(d.Basis)
	sort.Strings(d.Contested)
	d.Contested = dedupe(d.Contested)
	return d, nil
}

// candidate: a prediction that the plan fits, from calculation only; no
// vLLM validation or boot evidence is needed or implied.
func needCandidate(ev *evidenceView, d *Decision) []Requirement {
	p, ok := ev.effective(KindPrediction, VerdictFits, d, SubjectArtifact)
	if !ok || p.r.EpistemicStatus != Predicted {
		return []Requirement{NeedFittingPrediction}
	}
	d.Basis = append(d.Basis, p.digest)
	return nil
}

// conservative: fits by calculation with a stated margin, and
// boot-verified on the same hardware class at any engine version.
func needConservative(ev *evidenceView, d *Decision) []Requirement {
	var missing []Requirement
	p, _ := ev.effective(KindPrediction, VerdictFits, d, SubjectArtifact)
	if ev.q.MarginBytes <= 0 || p.r.Claim.Value == nil || *p.r.Claim.Value < ev.q.MarginBytes {
		missing = append(missing, NeedMargin)
	}
	b, ok := ev.effective(KindBoot, VerdictHealthy, d, SubjectArtifact, SubjectHardwareClass)
	if !ok || b.r.EpistemicStatus != Measured {
		missing = append(missing, NeedBootSameHardware)
	} else {
		d.Basis = append(d.Basis, b.digest)
		if f := Evaluate(b.r, ev.q.Freshness); f.State != Fresh {
			d.Stale = append(d.Stale, fmt.Sprintf("%s: %s (%s)", short(b.digest), f.State, f.Reason))
		}
	}
	return missing
}

// recommended endpoint: task- and serving-verified for the exact
// endpoint/application at the current engine identity, against an accepted
// request, with no contested record in the basis.
func needRecommended(ev *evidenceView, d *Decision) []Requirement {
	var missing []Requirement
	b, ok := ev.effective(KindBoot, VerdictHealthy, d, SubjectArtifact, SubjectHardwareClass, SubjectEndpoint)
	if !ok || !ev.fresh(b) || !ev.atDeployed(b) {
		missing = append(missing, NeedBootCurrentEngine)
	} else {
		d.Basis = append(d.Basis, b.digest)
	}
	missing = ev.requireFresh(d, missing, KindWorkload, VerdictMeetsSLO, NeedServing, SubjectEndpoint, SubjectApplication)
	missing = ev.requireFresh(d, missing, KindTask, VerdictPass, NeedTask, SubjectEndpoint, SubjectApplication)
	// The acceptance is of the request itself (the application), not of
	// an endpoint: one accepted request serves every endpoint it names.
	missing = ev.requireFresh(d, missing, KindAcceptance, VerdictAccepted, NeedAcceptedRequest, SubjectApplication)
	if len(ev.contested) > 0 {
		missing = append(missing, NeedUncontested)
	}
	return missing
}

// qualified solution (ADR-011): task reproduction on the exact retained
// solution plus every applicable serving constraint.
func needQualified(ev *evidenceView, d *Decision) []Requirement {
	var missing []Requirement
	t, ok := ev.effective(KindTask, VerdictReproduced, d, SubjectSolution)
	if ev.q.Solution == "" || !ok || !ev.fresh(t) || t.r.Claim.Quantity != "exact_solution_reproduction" {
		missing = append(missing, NeedExactReproduction)
	} else {
		d.Basis = append(d.Basis, t.digest)
	}
	if len(ev.q.ServingConstraints) == 0 || !ev.everyServingMet(d) {
		missing = append(missing, NeedEveryServingRequired)
	}
	return missing
}

func (ev *evidenceView) requireFresh(d *Decision, missing []Requirement, k Kind, verdict string, need Requirement, keys ...string) []Requirement {
	e, ok := ev.effective(k, verdict, d, keys...)
	if !ok || !ev.fresh(e) {
		return append(missing, need)
	}
	d.Basis = append(d.Basis, e.digest)
	return missing
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
