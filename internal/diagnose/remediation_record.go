package diagnose

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/version"
)

// Record identities.
const (
	ApplicationSchema        = "narwhal.diagnose.application"
	ApplicationSchemaVersion = 1
	// Producer names the records diagnose writes.
	Producer = "narwhal diagnose"
	// Subject keys of remediation records.
	SubjectFailure     = "failure"
	SubjectRule        = "rule"
	SubjectEngineMinor = "engine_minor"
	// Claim quantities.
	QuantityRemediation = "remediation_outcomes"
	QuantityCorrected   = "corrected_boot"
	QuantityRuleStatus  = "rule_status"
	displayApplication  = "application"
)

// ConstraintOutcome is one requirement's evaluation.
type ConstraintOutcome string

// Constraint outcomes. Unaffected: the diff cannot change the requirement
// (a memory-sizing change and a latency target), so the accepted
// request's standing carries over — it counts as satisfied, and is shown
// as not measured.
const (
	ConstraintSatisfied    ConstraintOutcome = "satisfied"
	ConstraintViolated     ConstraintOutcome = "violated"
	ConstraintNotEvaluated ConstraintOutcome = "not_evaluated"
	ConstraintUnaffected   ConstraintOutcome = "unaffected"
)

// ConstraintCheck is one accepted requirement judged against the
// corrected solution.
type ConstraintCheck struct {
	Requirement Requirement       `json:"requirement"`
	Outcome     ConstraintOutcome `json:"outcome"`
	Text        string            `json:"text"`
}

// Application is a remediation application (§2.13.2): one correction
// applied to one failure, with both outcomes, the plan diff, the
// requirements it was judged against and the records that prove it. It
// has no result field: the public result is derived (Derive) when shown.
type Application struct {
	Schema                string            `json:"schema"`
	SchemaVersion         int               `json:"schema_version"`
	ApplicationID         string            `json:"application_id"`
	Family                Family            `json:"family"`
	Fingerprint           Fingerprint       `json:"fingerprint"`
	FailureFingerprint    string            `json:"failure_fingerprint"`
	Rule                  RuleRef           `json:"rule"`
	EngineVersion         *EngineVersion    `json:"engine_version"`
	Rank                  int               `json:"rank"` // the correction's place in the remedy, 0 = least costly
	AcceptedRequest       Requirements      `json:"accepted_request"`
	AcceptedRequestDigest string            `json:"accepted_request_digest"`
	BrokenPlan            plan.Plan         `json:"broken_plan"`
	BrokenPlanDigest      string            `json:"broken_plan_digest"`
	CorrectedPlan         plan.Plan         `json:"corrected_plan"`
	CorrectedPlanDigest   string            `json:"corrected_plan_digest"`
	PlanDiff              []plan.Change     `json:"plan_diff"`
	RequiresArtifact      bool              `json:"requires_artifact"`
	Basis                 []string          `json:"basis"`
	TradeOffs             []TradeOff        `json:"trade_offs"`
	Risks                 []Requirement     `json:"risks"`
	ViolatedConstraints   []Violation       `json:"violated_constraints"`
	Constraints           []ConstraintCheck `json:"constraints"`
	MechanismOutcome      Mechanism         `json:"mechanism_outcome"`
	MechanismReason       string            `json:"mechanism_reason"`
	RequestOutcome        RequestOutcome    `json:"request_outcome"`
	ProvingRecords        []string          `json:"proving_records"`
	Extraction            Facts             `json:"extraction"`
}

// Result derives the public result from the two outcomes.
func (a Application) Result() Result { return Derive(a.MechanismOutcome, a.RequestOutcome) }

// planDigest is the digest of a plan's canonical form.
func planDigest(p plan.Plan) (string, error) {
	_, d, err := canon.MarshalDigest(p)
	return d, err
}

// Applications turns a remedy into one application record per correction
// (in rank order): nothing is proven yet, so the mechanism is
// not_evaluated, and the request is violated when the diff alone breaks a
// requirement, not_evaluated otherwise. inputs are digests of the files
// and records the diagnosis read (the log, the failure record).
func Applications(d Diagnosis, rem Remedy, req Requirements, ids ports.IDGenerator, clock ports.Clock, inputs []string) ([]Application, []evidence.Record, error) {
	var apps []Application
	var recs []evidence.Record
	for i, c := range rem.Corrections {
		a, err := newApplication(d, rem, c, i, req, ids.NewID())
		if err != nil {
			return nil, nil, err
		}
		r, err := a.Record(clock, nil, inputs)
		if err != nil {
			return nil, nil, err
		}
		apps, recs = append(apps, a), append(recs, r)
	}
	return apps, recs, nil
}

func newApplication(d Diagnosis, rem Remedy, c Correction, rank int, req Requirements, id string) (Application, error) {
	if req.Source == "" {
		req.Source = RequirementsNone
	}
	rd, err := req.Digest()
	if err != nil {
		return Application{}, fmt.Errorf("accepted request: %w", err)
	}
	bd, err := planDigest(rem.Base)
	if err != nil {
		return Application{}, fmt.Errorf("broken plan: %w", err)
	}
	cd, err := planDigest(c.Plan)
	if err != nil {
		return Application{}, fmt.Errorf("corrected plan: %w", err)
	}
	a := Application{
		Schema: ApplicationSchema, SchemaVersion: ApplicationSchemaVersion, ApplicationID: id, Family: d.Family,
		Fingerprint: d.Fingerprint, FailureFingerprint: d.FingerprintDigest, Rule: rem.Rule, EngineVersion: d.Facts.EngineVersion,
		Rank: rank, AcceptedRequest: req, AcceptedRequestDigest: rd, BrokenPlan: rem.Base.Clone(), BrokenPlanDigest: bd,
		CorrectedPlan: c.Plan.Clone(), CorrectedPlanDigest: cd, PlanDiff: slices.Clone(c.Changes), RequiresArtifact: c.RequiresArtifact,
		Basis: nonNil(c.Basis), TradeOffs: nonNil(c.TradeOffs), Risks: nonNil(c.Risks), ViolatedConstraints: nonNil(c.Violations),
		MechanismOutcome: MechanismNotEvaluated, MechanismReason: "no corrected boot recorded yet", ProvingRecords: []string{},
		Extraction: d.Facts,
	}
	a.Rule.Status = RuleHypothesis // what a rule's status is for this application is its own proof's business
	a.Constraints = a.evaluate(nil)
	a.RequestOutcome = requestOutcome(a.AcceptedRequest, a.Constraints)
	return a, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return slices.Clone(s)
}

// Record wraps the application in the evidence envelope. corrects names
// the application record a proof supersedes.
func (a Application) Record(clock ports.Clock, corrects *string, inputs []string) (evidence.Record, error) {
	body, err := toDisplay(a)
	if err != nil {
		return evidence.Record{}, fmt.Errorf("application %s: %w", a.ApplicationID, err)
	}
	status, level := evidence.Derived, evidence.CalculatedOnly
	if len(a.ProvingRecords) > 0 {
		status, level = evidence.Measured, evidence.MaintainerLabMeasured
	}
	verdict := fmt.Sprintf("mechanism=%s,request=%s", a.MechanismOutcome, a.RequestOutcome)
	in := append(slices.Clone(inputs), a.AcceptedRequestDigest, a.BrokenPlanDigest)
	in = append(in, a.ProvingRecords...)
	if corrects != nil {
		in = append(in, *corrects)
	}
	r := evidence.Record{
		Kind: evidence.KindCompatibility, ClaimScope: evidence.ScopeRemediation, EpistemicStatus: status, Level: level,
		Subject: map[string]string{evidence.SubjectApplication: a.ApplicationID, SubjectFailure: a.FailureFingerprint,
			SubjectRule: a.Rule.Fingerprint, evidence.SubjectSolution: a.CorrectedPlanDigest},
		Claim:      evidence.Claim{Quantity: QuantityRemediation, Verdict: &verdict},
		Engine:     evidence.Engine{Name: "vllm", Version: engineVersionString(a.EngineVersion), Packages: []string{}},
		Provenance: evidence.Provenance{Producer: Producer, ProducerVersion: version.Version, Inputs: sortedDigests(in)},
		Corrects:   corrects,
		Display:    map[string]any{displayApplication: body},
	}
	return evidence.Stamp(r, clock), nil
}

func engineVersionString(v *EngineVersion) string {
	if v == nil {
		return ""
	}
	return v.String()
}

func sortedDigests(in []string) []string {
	out := []string{}
	for _, d := range in {
		if canon.IsDigest(d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// toDisplay turns a typed body into the generic form an envelope's
// display holds (canonical bytes either way).
func toDisplay(v any) (map[string]any, error) {
	b, err := canon.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeApplication reads the application out of a remediation record,
// strictly: an unknown field — a stored "result" among them — fails, and
// the envelope's verdict must match the body's outcomes.
func DecodeApplication(r evidence.Record) (Application, error) {
	if r.ClaimScope != evidence.ScopeRemediation || r.Claim.Quantity != QuantityRemediation {
		return Application{}, fmt.Errorf("record is %s/%s, not a remediation application", r.ClaimScope, r.Claim.Quantity)
	}
	raw, ok := r.Display[displayApplication]
	if !ok {
		return Application{}, fmt.Errorf("remediation record has no display.application")
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return Application{}, err
	}
	var a Application
	if err := canon.DecodeStrict(b, &a); err != nil {
		return Application{}, fmt.Errorf("application: %w", err)
	}
	switch {
	case a.Schema != ApplicationSchema:
		return Application{}, fmt.Errorf("application schema %q: want %s", a.Schema, ApplicationSchema)
	case a.SchemaVersion != ApplicationSchemaVersion:
		return Application{}, fmt.Errorf("application schema_version %d: this narwhal reads %d", a.SchemaVersion, ApplicationSchemaVersion)
	case r.Claim.Verdict == nil || *r.Claim.Verdict != fmt.Sprintf("mechanism=%s,request=%s", a.MechanismOutcome, a.RequestOutcome):
		return Application{}, fmt.Errorf("application outcomes do not match the record's verdict")
	}
	return a, nil
}

// bootFacts are what a corrected boot showed, for the request check.
type bootFacts struct {
	healthy       bool
	kvTokens      int64 // 0 when not logged
	servedMaxLen  int64 // the max_model_len the engine reported serving (0 when not logged)
	servingRecord string
	servingPass   *bool
}

// evaluate judges the corrected solution against every accepted
// requirement. Without a boot (nil), only what the diff decides alone
// is evaluated.
func (a Application) evaluate(boot *bootFacts) []ConstraintCheck {
	req := a.AcceptedRequest
	out := []ConstraintCheck{}
	static := func(r Requirement, stated bool, ok string) {
		switch v, bad := findViolation(a.ViolatedConstraints, r); {
		case bad:
			out = append(out, ConstraintCheck{r, ConstraintViolated, v.Text})
		case stated:
			out = append(out, ConstraintCheck{r, ConstraintSatisfied, ok})
		}
	}
	static(ReqArtifact, req.ArtifactPinned, "the corrected plan serves the fleet's model")
	static(ReqTensorParallel, req.TensorParallel > 0, "the engine shape is the fleet's")
	static(ReqModelDType, req.Contract != nil && req.Contract.ModelDType != plan.DTypeUnset, "dtype matches the contract")
	static(ReqKVCacheDType, req.Contract != nil && req.Contract.KVCacheDType != plan.KVCacheUnset, "kv_cache_dtype matches the contract")
	if req.MaxModelLen > 0 {
		out = append(out, a.contextCheck(boot))
	}
	if req.SLO != nil {
		out = append(out, a.sloCheck(boot))
	}
	return out
}

// contextCheck: the corrected engine must serve, and its KV cache hold,
// the context the fleet needs.
func (a Application) contextCheck(boot *bootFacts) ConstraintCheck {
	need := a.AcceptedRequest.MaxModelLen
	if v, ok := findViolation(a.ViolatedConstraints, ReqMaxModelLen); ok {
		return ConstraintCheck{ReqMaxModelLen, ConstraintViolated, v.Text}
	}
	if boot == nil || !boot.healthy {
		return ConstraintCheck{ReqMaxModelLen, ConstraintNotEvaluated, "needs a healthy corrected boot"}
	}
	served := boot.servedMaxLen
	if served == 0 {
		served = a.CorrectedPlan.MaxModelLen
	}
	switch {
	case served > 0 && served < need:
		return ConstraintCheck{ReqMaxModelLen, ConstraintViolated, fmt.Sprintf("the engine serves max_model_len %d, the fleet needs %d", served, need)}
	case boot.kvTokens > 0 && boot.kvTokens < need:
		return ConstraintCheck{ReqMaxModelLen, ConstraintViolated, fmt.Sprintf("the KV cache holds %d tokens, the fleet needs %d", boot.kvTokens, need)}
	case served >= need && boot.kvTokens >= need:
		return ConstraintCheck{ReqMaxModelLen, ConstraintSatisfied, fmt.Sprintf("serves %d tokens and the KV cache holds %d", served, boot.kvTokens)}
	}
	return ConstraintCheck{ReqMaxModelLen, ConstraintNotEvaluated, "the boot log states neither the served max_model_len nor the KV cache size"}
}

// sloCheck: a diff that changes per-token work (eager mode, capture
// sizes, kernels, batch limits, TP, dtypes) needs a serving record; one
// that only sizes memory leaves the latency target unaffected.
func (a Application) sloCheck(boot *bootFacts) ConstraintCheck {
	if len(a.Risks) == 0 {
		return ConstraintCheck{ReqSLO, ConstraintUnaffected, "the diff changes memory sizing only (max_model_len, gpu_memory_utilization, port); per-token work is unchanged; not measured"}
	}
	if boot != nil && boot.servingPass != nil {
		if *boot.servingPass {
			return ConstraintCheck{ReqSLO, ConstraintSatisfied, "serving record " + boot.servingRecord + " meets the SLO"}
		}
		return ConstraintCheck{ReqSLO, ConstraintViolated, "serving record " + boot.servingRecord + " misses the SLO"}
	}
	return ConstraintCheck{ReqSLO, ConstraintNotEvaluated, "the diff changes latency: a serving record of the corrected engine (narwhal-check's slo gate) decides"}
}

func findViolation(vs []Violation, r Requirement) (Violation, bool) {
	for _, v := range vs {
		if v.Requirement == r {
			return v, true
		}
	}
	return Violation{}, false
}

// requestOutcome folds the checks: any violation violates; otherwise any
// unevaluated check leaves it not evaluated; no accepted request at all
// is not evaluated either (there is nothing to satisfy).
func requestOutcome(req Requirements, cs []ConstraintCheck) RequestOutcome {
	if req.Source != RequirementsFleet && req.MaxModelLen == 0 {
		for _, c := range cs {
			if c.Outcome == ConstraintViolated {
				return RequestViolated
			}
		}
		return RequestNotEvaluated
	}
	out := RequestSatisfied
	for _, c := range cs {
		switch c.Outcome {
		case ConstraintViolated:
			return RequestViolated
		case ConstraintNotEvaluated:
			out = RequestNotEvaluated
		}
	}
	return out
}
