package diagnose

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/version"
)

// The remediation proof (ADR-006 §9; reference/evidence.md §2.13.3): a
// boot log of the corrected plan becomes a corrected-boot record; the
// application is re-evaluated against its accepted request snapshot and
// written again (correcting the first record); a verified mechanism
// promotes the rule for the engine minor the boot ran.

// Record identities of the proof.
const (
	BootSchema             = "narwhal.diagnose.corrected_boot"
	BootSchemaVersion      = 1
	PromotionSchema        = "narwhal.diagnose.rule_promotion"
	PromotionSchemaVersion = 1
	displayBoot            = "corrected_boot"
	displayPromotion       = "rule_promotion"
)

// Corrected-boot verdicts.
const (
	BootHealthy    = "healthy"     // started, KV cache allocated, no failure
	BootFailed     = "failed"      // a failure in the log (the original or another)
	BootNotOfPlan  = "not_of_plan" // the log's typed values contradict the corrected plan
	BootIncomplete = "incomplete"  // no failure, but no healthy start either (log cut short)
)

// PlanCheck compares one corrected-plan field with what the boot log
// states about it.
type PlanCheck struct {
	Field   plan.Field `json:"field"`
	Outcome string     `json:"outcome"` // "matches", "differs", "not_logged"
	Planned plan.Value `json:"planned"`
	Logged  plan.Value `json:"logged"`
}

// UnmarshalJSON reads a stored check, its values typed by the field.
func (c *PlanCheck) UnmarshalJSON(b []byte) error {
	var raw struct {
		Field   plan.Field      `json:"field"`
		Outcome string          `json:"outcome"`
		Planned json.RawMessage `json:"planned"`
		Logged  json.RawMessage `json:"logged"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var ch plan.Change
	cb, _ := json.Marshal(map[string]any{"path": raw.Field, "from": raw.Planned, "to": raw.Logged})
	if err := ch.UnmarshalJSON(cb); err != nil {
		return err
	}
	*c = PlanCheck{Field: raw.Field, Outcome: raw.Outcome, Planned: ch.From, Logged: ch.To}
	return nil
}

// CorrectedBoot is what a boot log of a corrected plan showed.
type CorrectedBoot struct {
	Schema              string         `json:"schema"`
	SchemaVersion       int            `json:"schema_version"`
	ApplicationID       string         `json:"application_id"`
	ApplicationRecord   string         `json:"application_record"`
	CorrectedPlanDigest string         `json:"corrected_plan_digest"`
	LogDigest           string         `json:"log_digest"`
	Lines               int            `json:"lines"`
	Status              Status         `json:"status"`
	Family              Family         `json:"family"`
	FailureFingerprint  string         `json:"failure_fingerprint"` // the boot's own; "" without a failure
	OriginalFailure     bool           `json:"original_failure"`    // the application's fingerprint recurred
	Healthy             bool           `json:"healthy"`
	KVCacheTokens       int64          `json:"kv_cache_tokens"`
	KVCacheBlocks       int64          `json:"kv_cache_blocks"` // V0's "# cuda blocks: N": its KV allocation, in blocks
	ServedMaxModelLen   int64          `json:"served_max_model_len"`
	PlanChecks          []PlanCheck    `json:"plan_checks"`
	EngineVersion       *EngineVersion `json:"engine_version"`
	Mechanism           Mechanism      `json:"mechanism"`
	Reason              string         `json:"reason"`
}

// ServingEvidence is a serving record of the corrected engine that
// decides a latency-changing diff's SLO (narwhal-check's slo gate).
type ServingEvidence struct {
	Digest   string
	MeetsSLO bool
}

// ServingFrom reads serving evidence from a stored record: narwhal-check's
// serving record (verdict pass / fail) or a serving-performance record
// (meets_slo / anything else).
func ServingFrom(r evidence.Record, digest string) (ServingEvidence, error) {
	if r.Claim.Verdict == nil || r.ClaimScope != evidence.ScopeKVTransfer && r.ClaimScope != evidence.ScopeServingPerformance {
		return ServingEvidence{}, fmt.Errorf("record %s is not a serving record with a verdict (claim scope %s)", digest, r.ClaimScope)
	}
	v := *r.Claim.Verdict
	return ServingEvidence{Digest: digest, MeetsSLO: v == evidence.VerdictPass || v == evidence.VerdictMeetsSLO}, nil
}

// ProofInput is what a proof reads.
type ProofInput struct {
	Application       evidence.Record // the stored application record
	ApplicationDigest string
	BootLog           io.ReadSeeker // the corrected engine's log, read twice (streaming)
	Options           Options       // bounds for the log's figures, as for Diagnose
	Serving           *ServingEvidence
}

// Proof is what a proof produces. Records are stamped, not yet stored.
type Proof struct {
	Boot              CorrectedBoot
	BootRecord        evidence.Record
	BootDigest        string
	Application       Application
	ApplicationRecord evidence.Record // corrects the input record
	ApplicationDigest string
	// Promotion is the rule's promotion for the boot's engine minor, when
	// the mechanism is verified and the engine version is known.
	Promotion       *evidence.Record
	PromotionDigest string
	Result          Result // Derive(mechanism, request): shown, never stored
}

// Prove records a corrected boot and re-derives the application. It is
// deterministic; time reaches it only through clock.
func Prove(in ProofInput, clock ports.Clock) (Proof, error) {
	app, err := DecodeApplication(in.Application)
	if err != nil {
		return Proof{}, fmt.Errorf("--application: %w", err)
	}
	boot, facts, err := readBoot(in, app)
	if err != nil {
		return Proof{}, err
	}
	var pf Proof
	pf.Boot = boot
	if pf.BootRecord, pf.BootDigest, err = boot.record(app, clock, in.ApplicationDigest); err != nil {
		return Proof{}, err
	}
	app.MechanismOutcome, app.MechanismReason = boot.Mechanism, boot.Reason
	app.ProvingRecords = []string{pf.BootDigest}
	if in.Serving != nil {
		app.ProvingRecords = append(app.ProvingRecords, in.Serving.Digest)
		facts.servingRecord, facts.servingPass = in.Serving.Digest, &in.Serving.MeetsSLO
	}
	app.ProvingRecords = sortedDigests(app.ProvingRecords)
	app.Constraints = app.evaluate(&facts)
	app.RequestOutcome = requestOutcome(app.AcceptedRequest, app.Constraints)
	corrects := in.ApplicationDigest
	if pf.ApplicationRecord, err = app.Record(clock, &corrects, nil); err != nil {
		return Proof{}, err
	}
	if _, pf.ApplicationDigest, err = evidence.Encode(pf.ApplicationRecord); err != nil {
		return Proof{}, err
	}
	pf.Application, pf.Result = app, app.Result()
	if boot.Mechanism == MechanismVerified && boot.EngineVersion != nil {
		rec, d, err := promotion(app, boot, pf.BootDigest, clock)
		if err != nil {
			return Proof{}, err
		}
		pf.Promotion, pf.PromotionDigest = &rec, d
	}
	return pf, nil
}

// readBoot reads the boot log twice — the failure scanner, then the
// startup-memory parser — and hashes it on the first pass.
func readBoot(in ProofInput, app Application) (CorrectedBoot, bootFacts, error) {
	if in.BootLog == nil {
		return CorrectedBoot{}, bootFacts{}, errors.New("--boot-log: no log to read")
	}
	if _, err := in.BootLog.Seek(0, io.SeekStart); err != nil {
		return CorrectedBoot{}, bootFacts{}, fmt.Errorf("--boot-log: %w", err)
	}
	h := sha256.New()
	d, err := Diagnose(io.TeeReader(in.BootLog, h), in.Options)
	if err != nil {
		return CorrectedBoot{}, bootFacts{}, fmt.Errorf("--boot-log: %w", err)
	}
	if _, err := io.Copy(h, in.BootLog); err != nil { // the scanner may stop early
		return CorrectedBoot{}, bootFacts{}, fmt.Errorf("--boot-log: %w", err)
	}
	if _, err := in.BootLog.Seek(0, io.SeekStart); err != nil {
		return CorrectedBoot{}, bootFacts{}, fmt.Errorf("--boot-log: %w", err)
	}
	opt := memory.VLLMLogOptions{GPUTotalBytes: in.Options.GPUTotalBytes}
	st, perr := memory.ParseVLLMLog(in.BootLog, opt)
	if perr != nil && !errors.Is(perr, memory.ErrNoMemoryLines) && isReadError(perr) {
		return CorrectedBoot{}, bootFacts{}, fmt.Errorf("--boot-log: %w", perr)
	}
	b := CorrectedBoot{
		Schema: BootSchema, SchemaVersion: BootSchemaVersion, ApplicationID: app.ApplicationID, ApplicationRecord: in.ApplicationDigest,
		CorrectedPlanDigest: app.CorrectedPlanDigest, LogDigest: canon.DigestPrefix + hex.EncodeToString(h.Sum(nil)),
		Lines: d.Lines, Status: d.Status, Family: d.Family, EngineVersion: d.Facts.EngineVersion, PlanChecks: []PlanCheck{},
	}
	if d.Status != StatusNoFailure {
		b.FailureFingerprint = d.FingerprintDigest
		b.OriginalFailure = d.FingerprintDigest == app.FailureFingerprint
	}
	obs := startupFigures(st)
	b.KVCacheTokens, b.KVCacheBlocks, b.ServedMaxModelLen = obs.kvTokens, obs.blocks, obs.maxLen
	// V1 states the KV cache in tokens; V0 only in device blocks.
	b.Healthy = d.Status == StatusNoFailure && (obs.kvTokens > 0 || obs.blocks > 0)
	b.PlanChecks = planChecks(app.CorrectedPlan, obs)
	b.Mechanism, b.Reason = mechanismOf(b, app)
	return b, bootFacts{healthy: b.Healthy, kvTokens: obs.kvTokens, servedMaxLen: obs.maxLen}, nil
}

// isReadError tells an I/O failure from a log whose memory figures are
// inconsistent (which is a finding about the boot, not an error).
func isReadError(err error) bool {
	var oe *memory.ObservationError
	return !errors.As(err, &oe)
}

// startupObs are the typed startup figures the proof reads.
type startupObs struct {
	kvTokens int64
	blocks   int64    // device KV blocks (V0's "# cuda blocks", V1's num_gpu_blocks)
	maxLen   int64    // "Maximum concurrency for N tokens per request": the served max_model_len
	util     *float64 // gpu_memory_utilization when logged
	graphs   bool     // CUDA graphs were captured
}

func startupFigures(st memory.StartupLog) startupObs {
	var o startupObs
	for _, ob := range st.Observations {
		if ob.KVCacheSizeTokens != nil && o.kvTokens == 0 {
			o.kvTokens = *ob.KVCacheSizeTokens
		}
		if ob.NumGPUBlocks != nil && o.blocks == 0 {
			o.blocks = *ob.NumGPUBlocks
		}
		if ob.MaxConcurrencyTokens != nil && o.maxLen == 0 {
			o.maxLen = *ob.MaxConcurrencyTokens
		}
		if ob.GPUMemoryUtilization != nil && o.util == nil {
			u := *ob.GPUMemoryUtilization
			o.util = &u
		}
		if ob.CUDAGraphActualBytes != nil {
			o.graphs = true
		}
	}
	return o
}

// planChecks compares the corrected plan's set fields with the figures
// the boot log states; a field the log does not show is not_logged.
func planChecks(p plan.Plan, o startupObs) []PlanCheck {
	out := []PlanCheck{}
	add := func(f plan.Field, logged plan.Value, known bool, match bool) {
		c := PlanCheck{Field: f, Planned: p.Get(f), Logged: logged, Outcome: "not_logged"}
		if known {
			c.Outcome = "differs"
			if match {
				c.Outcome = "matches"
			}
		}
		out = append(out, c)
	}
	if p.MaxModelLen > 0 {
		add(plan.FieldMaxModelLen, plan.Value{Kind: plan.KindInt, Int: o.maxLen}, o.maxLen > 0, o.maxLen == p.MaxModelLen)
	}
	if p.GPUMemoryUtilization > 0 {
		var v plan.Value
		if o.util != nil {
			v = plan.Value{Kind: plan.KindFloat, Float: *o.util}
		}
		add(plan.FieldGPUMemoryUtilization, v, o.util != nil, o.util != nil && math.Abs(*o.util-p.GPUMemoryUtilization) < 1e-6)
	}
	if p.EnforceEager {
		add(plan.FieldEnforceEager, plan.Value{Kind: plan.KindBool, Bool: !o.graphs}, o.graphs, false)
	}
	return out
}

// mechanismOf decides mechanism_outcome: verified needs a healthy start
// of this plan without the original failure.
func mechanismOf(b CorrectedBoot, app Application) (Mechanism, string) {
	for _, c := range b.PlanChecks {
		if c.Outcome == "differs" {
			return MechanismNotEvaluated, fmt.Sprintf("the boot log is not of the corrected plan: %s is %s, the plan says %s", c.Field.Path(), c.Logged, c.Planned)
		}
	}
	switch {
	case b.OriginalFailure:
		return MechanismFailed, fmt.Sprintf("the original failure (%s) recurred", app.Family)
	case b.Status != StatusNoFailure:
		return MechanismFailed, fmt.Sprintf("the corrected engine failed differently (%s)", b.Family)
	case !b.Healthy:
		return MechanismNotEvaluated, "the boot log shows no healthy start (no \"GPU KV cache size\" or V0 \"# cuda blocks\" line): it may end before the engine was ready"
	case b.KVCacheTokens == 0:
		return MechanismVerified, fmt.Sprintf("healthy start: KV cache of %d blocks, no failure, the original fingerprint absent", b.KVCacheBlocks)
	}
	return MechanismVerified, fmt.Sprintf("healthy start: KV cache of %d tokens, no failure, the original fingerprint absent", b.KVCacheTokens)
}

// verdict is the boot record's claim.
func (b CorrectedBoot) verdict() string {
	switch {
	case b.Mechanism == MechanismVerified:
		return BootHealthy
	case b.Status != StatusNoFailure:
		return BootFailed
	case slices.ContainsFunc(b.PlanChecks, func(c PlanCheck) bool { return c.Outcome == "differs" }):
		return BootNotOfPlan
	}
	return BootIncomplete
}

func (b CorrectedBoot) record(app Application, clock ports.Clock, appDigest string) (evidence.Record, string, error) {
	body, err := toDisplay(b)
	if err != nil {
		return evidence.Record{}, "", fmt.Errorf("corrected boot: %w", err)
	}
	v := b.verdict()
	r := evidence.Stamp(evidence.Record{
		Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured, Level: evidence.MaintainerLabMeasured,
		Subject: map[string]string{evidence.SubjectApplication: app.ApplicationID, evidence.SubjectSolution: app.CorrectedPlanDigest,
			SubjectFailure: app.FailureFingerprint},
		Claim:      evidence.Claim{Quantity: QuantityCorrected, Verdict: &v},
		Engine:     evidence.Engine{Name: "vllm", Version: engineVersionString(b.EngineVersion), Packages: []string{}},
		Provenance: evidence.Provenance{Producer: Producer, ProducerVersion: version.Version, Inputs: sortedDigests([]string{b.LogDigest, appDigest})},
		Display:    map[string]any{displayBoot: body},
	}, clock)
	_, d, err := evidence.Encode(r)
	return r, d, err
}

// RulePromotion promotes a rule for one engine minor (§2.13.3): a new rule
// version whose proof is the corrected boot. The status it grants is the
// rule's, for that minor only; it never makes another application Fixed.
type RulePromotion struct {
	Schema          string  `json:"schema"`
	SchemaVersion   int     `json:"schema_version"`
	Rule            RuleRef `json:"rule"` // the new version, mechanism_verified
	Supersedes      string  `json:"supersedes"`
	EngineMinor     string  `json:"engine_minor"`
	PromotingRecord string  `json:"promoting_record"`
	ApplicationID   string  `json:"application_id"`
}

func engineMinor(v EngineVersion) string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// EngineMinor is the "major.minor" a rule's promotion is scoped to.
func EngineMinor(v EngineVersion) string { return engineMinor(v) }

// RuleStatusOf is the status of the rule that answers d, for the engine
// minor the log names: hypothesis when the family has no rule or the log
// names no version (a promotion is never carried to an unknown engine).
func RuleStatusOf(src RecordSource, d Diagnosis) (RuleStatus, error) {
	r, ok := RuleFor(d.Family)
	if !ok || d.Facts.EngineVersion == nil {
		return RuleHypothesis, nil
	}
	return RuleStatusFor(src, r, engineMinor(*d.Facts.EngineVersion))
}

func promotion(app Application, boot CorrectedBoot, bootDigest string, clock ports.Clock) (evidence.Record, string, error) {
	next := app.Rule
	next.Version++
	next.Status = RuleMechanismVerified
	next.Fingerprint = Rule{ID: next.ID, Family: next.Family, Version: next.Version}.Fingerprint()
	body, err := toDisplay(RulePromotion{Schema: PromotionSchema, SchemaVersion: PromotionSchemaVersion, Rule: next,
		Supersedes: app.Rule.Fingerprint, EngineMinor: engineMinor(*boot.EngineVersion), PromotingRecord: bootDigest, ApplicationID: app.ApplicationID})
	if err != nil {
		return evidence.Record{}, "", err
	}
	v := string(RuleMechanismVerified)
	r := evidence.Stamp(evidence.Record{
		Kind: evidence.KindCompatibility, ClaimScope: evidence.ScopeRemediation, EpistemicStatus: evidence.Measured, Level: evidence.MaintainerLabMeasured,
		Subject:    map[string]string{SubjectRule: app.Rule.Fingerprint, SubjectEngineMinor: engineMinor(*boot.EngineVersion)},
		Claim:      evidence.Claim{Quantity: QuantityRuleStatus, Verdict: &v},
		Engine:     evidence.Engine{Name: "vllm", Version: boot.EngineVersion.String(), Packages: []string{}},
		Provenance: evidence.Provenance{Producer: Producer, ProducerVersion: version.Version, Inputs: []string{bootDigest}},
		Display:    map[string]any{displayPromotion: body},
	}, clock)
	_, d, err := evidence.Encode(r)
	return r, d, err
}

// RecordSource is where stored records are read from (*store.Store).
type RecordSource interface {
	List() ([]string, error)
	Get(digest string) (evidence.Record, []byte, error)
}

// RuleStatusFor is a rule's status for one engine minor ("0.11"): verified
// only when a promotion record for exactly that rule version and minor
// names a stored corrected-boot record that verified the mechanism.
func RuleStatusFor(src RecordSource, r Rule, minor string) (RuleStatus, error) {
	ds, err := src.List()
	if err != nil {
		return RuleHypothesis, err
	}
	fp := r.Fingerprint()
	for _, d := range ds {
		rec, _, err := src.Get(d)
		if err != nil {
			return RuleHypothesis, err
		}
		if rec.Claim.Quantity != QuantityRuleStatus || rec.Subject[SubjectRule] != fp || rec.Subject[SubjectEngineMinor] != minor {
			continue
		}
		var p RulePromotion
		if err := decodeDisplay(rec, displayPromotion, &p); err != nil {
			return RuleHypothesis, fmt.Errorf("rule promotion %s: %w", d, err)
		}
		if ok, err := provesMechanism(src, p.PromotingRecord); err != nil || ok {
			return RuleMechanismVerified, err
		}
	}
	return RuleHypothesis, nil
}

func provesMechanism(src RecordSource, digest string) (bool, error) {
	rec, _, err := src.Get(digest)
	if err != nil {
		return false, fmt.Errorf("promoting record %s: %w", digest, err)
	}
	var b CorrectedBoot
	if rec.Kind != evidence.KindBoot || rec.Claim.Quantity != QuantityCorrected || decodeDisplay(rec, displayBoot, &b) != nil {
		return false, nil
	}
	return b.Mechanism == MechanismVerified && rec.Claim.Verdict != nil && *rec.Claim.Verdict == BootHealthy, nil
}

func decodeDisplay(r evidence.Record, key string, v any) error {
	raw, ok := r.Display[key]
	if !ok {
		return fmt.Errorf("no display.%s", key)
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	return canon.DecodeStrict(b, v)
}

// FindApplication resolves --application: a record digest, or an
// application id — then the newest record of it (the one no other record
// corrects).
func FindApplication(src RecordSource, id string) (evidence.Record, string, error) {
	if canon.IsDigest(id) {
		r, _, err := src.Get(id)
		if err == nil {
			_, err = DecodeApplication(r)
		}
		return r, id, err
	}
	ds, err := src.List()
	if err != nil {
		return evidence.Record{}, "", err
	}
	found := map[string]evidence.Record{}
	corrected := map[string]bool{}
	for _, d := range ds {
		r, _, err := src.Get(d)
		if err != nil {
			return evidence.Record{}, "", err
		}
		if r.Claim.Quantity == QuantityRemediation && r.Subject[evidence.SubjectApplication] == id {
			found[d] = r
			if r.Corrects != nil {
				corrected[*r.Corrects] = true
			}
		}
	}
	var heads []string
	for d := range found {
		if !corrected[d] {
			heads = append(heads, d)
		}
	}
	slices.Sort(heads)
	switch len(heads) {
	case 0:
		return evidence.Record{}, "", fmt.Errorf("application %q: no remediation record in the store; pass the id narwhal diagnose printed, or a record digest", id)
	case 1:
		return found[heads[0]], heads[0], nil
	}
	return evidence.Record{}, "", fmt.Errorf("application %q: %d uncorrected records (%v); pass a record digest", id, len(heads), heads)
}
