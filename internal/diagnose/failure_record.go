package diagnose

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/version"
)

// The failure record (reference/evidence.md §2.11.2, INV-10): what one
// failed start-up's log showed — the fingerprint, the family (or
// unrecognized), the sanitized typed facts and the values the sanitizer
// refused — with the broken plan the diagnosis assumed and the log's
// digest. Every diagnosed failure is stored, recognized or not; an
// unrecognized one keeps its facts and template digest so a later rule
// can be proposed from stored records. The log itself is not kept.

// Failure record identity.
const (
	FailureSchema        = "narwhal.diagnose.failure"
	FailureSchemaVersion = 1
	QuantityFailure      = "failure_fingerprint"
	displayFailure       = "failure"
)

// FailureRecord is the body of a failure record: the diagnosis (its
// fields flattened, as encoding/json flattens an embedded struct) and what
// it was read from and points at.
type FailureRecord struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	Diagnosis
	LogDigest        string   `json:"log_digest"`
	BrokenPlanDigest string   `json:"broken_plan_digest"`
	Rule             *RuleRef `json:"rule"` // nil for an unrecognized failure
	Needs            []Need   `json:"needs"`
}

// NewFailure builds the failure record body of a diagnosis and its remedy.
// logDigest is the digest of the log's bytes (canon.DigestPrefix + hex).
func NewFailure(d Diagnosis, rem Remedy, logDigest string) (FailureRecord, error) {
	if d.Status == StatusNoFailure {
		return FailureRecord{}, fmt.Errorf("failure record: the log shows no failure")
	}
	bd, err := planDigest(rem.Base)
	if err != nil {
		return FailureRecord{}, fmt.Errorf("failure record: broken plan: %w", err)
	}
	var rule *RuleRef
	if _, ok := RuleFor(d.Family); ok {
		r := rem.Rule
		rule = &r
	}
	d.Rejected, d.Evidence = nonNil(d.Rejected), nonNil(d.Evidence)
	return FailureRecord{
		Schema: FailureSchema, SchemaVersion: FailureSchemaVersion, Diagnosis: d,
		LogDigest: logDigest, BrokenPlanDigest: bd, Rule: rule, Needs: nonNil(rem.Needs),
	}, nil
}

// Record wraps the failure in the evidence envelope: a measured boot
// observation whose verdict is the family (never "healthy").
func (f FailureRecord) Record(clock ports.Clock) (evidence.Record, error) {
	body, err := toDisplay(f)
	if err != nil {
		return evidence.Record{}, fmt.Errorf("failure record: %w", err)
	}
	verdict := string(f.Family)
	r := evidence.Stamp(evidence.Record{
		Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured, Level: evidence.MaintainerLabMeasured,
		Subject:    map[string]string{SubjectFailure: f.FingerprintDigest, evidence.SubjectSolution: f.BrokenPlanDigest},
		Claim:      evidence.Claim{Quantity: QuantityFailure, Verdict: &verdict},
		Engine:     evidence.Engine{Name: "vllm", Version: engineVersionString(f.Facts.EngineVersion), Packages: []string{}},
		Provenance: evidence.Provenance{Producer: Producer, ProducerVersion: version.Version, Inputs: sortedDigests([]string{f.LogDigest, f.BrokenPlanDigest})},
		Display:    map[string]any{displayFailure: body},
	}, clock)
	if _, _, err := evidence.Encode(r); err != nil {
		return evidence.Record{}, err
	}
	return r, nil
}

// DecodeFailure reads the body of a failure record, strictly.
func DecodeFailure(r evidence.Record) (FailureRecord, error) {
	if r.Claim.Quantity != QuantityFailure {
		return FailureRecord{}, fmt.Errorf("record is %s, not a failure record", r.Claim.Quantity)
	}
	var f FailureRecord
	if err := decodeDisplay(r, displayFailure, &f); err != nil {
		return FailureRecord{}, fmt.Errorf("failure record: %w", err)
	}
	if f.Schema != FailureSchema || f.SchemaVersion != FailureSchemaVersion {
		return FailureRecord{}, fmt.Errorf("failure record schema %s v%d: this narwhal reads %s v%d", f.Schema, f.SchemaVersion, FailureSchema, FailureSchemaVersion)
	}
	return f, nil
}
