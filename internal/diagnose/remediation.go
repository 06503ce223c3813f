package diagnose

import (
	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
)

// Remediation outcomes and the derived public result (ADR-006 §9;
// reference/evidence.md §2.13).

// Mechanism is mechanism_outcome: did the correction remove the
// fingerprinted failure and restore engine health?
type Mechanism string

// Mechanism outcomes.
const (
	MechanismVerified     Mechanism = "verified"
	MechanismFailed       Mechanism = "failed"
	MechanismNotEvaluated Mechanism = "not_evaluated"
)

// RequestOutcome is request_outcome: does the corrected solution still
// satisfy the accepted requirements?
type RequestOutcome string

// Request outcomes.
const (
	RequestSatisfied    RequestOutcome = "satisfied"
	RequestViolated     RequestOutcome = "violated"
	RequestNotEvaluated RequestOutcome = "not_evaluated"
)

// Result is the public result. It is never stored: Derive computes it
// from the two outcomes whenever it is shown.
type Result string

// Public results.
const (
	ResultFixed       Result = "Fixed"
	ResultAlternative Result = "Alternative with trade-offs"
	ResultUnverified  Result = "Unverified suggestion"
)

// Derive is the only producer of a Result: Fixed needs a verified
// mechanism and a satisfied request; a verified mechanism with a violated
// request is an alternative with trade-offs; anything else is unverified.
func Derive(m Mechanism, r RequestOutcome) Result {
	switch {
	case m == MechanismVerified && r == RequestSatisfied:
		return ResultFixed
	case m == MechanismVerified && r == RequestViolated:
		return ResultAlternative
	}
	return ResultUnverified
}

// RequirementsSource says where the accepted requirements came from.
type RequirementsSource string

// Requirement sources.
const (
	RequirementsNone  RequirementsSource = "none"  // no fleet given: only what the operator stated
	RequirementsFleet RequirementsSource = "fleet" // the fleet document
)

// SLO is the fleet's latency targets, in seconds.
type SLO struct {
	TTFTSeconds float64 `json:"ttft_s"`
	TPOTSeconds float64 `json:"tpot_s"`
}

// ContractPins are the engine-contract values a correction must keep.
// The version strings are the operator's fleet document, not a log.
type ContractPins struct {
	VLLMVersion          string            `json:"vllm_version"`
	NIXLConnectorVersion int               `json:"nixl_connector_version"`
	ImageDigest          string            `json:"image_digest"`
	ModelDType           plan.DType        `json:"model_dtype"`
	KVCacheDType         plan.KVCacheDType `json:"kv_cache_dtype"`
}

// Requirements are the accepted request snapshot a correction is judged
// against (§2.13.3): the SLO, the context the fleet needs, the pinned
// artifact and engine shape, and the contract.
type Requirements struct {
	Source         RequirementsSource `json:"source"`
	SLO            *SLO               `json:"slo"`
	MaxModelLen    int64              `json:"max_model_len"` // 0: not stated
	ArtifactPinned bool               `json:"artifact_pinned"`
	TensorParallel int                `json:"tensor_parallel"` // 0: not declared
	Contract       *ContractPins      `json:"contract"`
}

// Digest is the digest of the snapshot's canonical form.
func (r Requirements) Digest() (string, error) {
	if r.Source == "" {
		r.Source = RequirementsNone
	}
	_, d, err := canon.MarshalDigest(r)
	return d, err
}
