package evidence

// Kind is the evidence kind; it fixes the freshness clock.
type Kind string

const (
	KindCompatibility Kind = "compatibility"
	KindBoot          Kind = "boot"
	KindWorkload      Kind = "workload"
	KindPrice         Kind = "price"
	KindSecurity      Kind = "security"
	KindMetadata      Kind = "metadata"
	KindPrediction    Kind = "prediction" // calculated memory fit, for candidate
	KindTask          Kind = "task"       // task-suite outcomes
	KindAcceptance    Kind = "acceptance" // an accepted DecisionRequest or task suite
	KindProposal      Kind = "proposal"   // a proposed DecisionRequest or task suite revision
	KindEndpointState Kind = "endpoint_state"
)

var kinds = set(KindCompatibility, KindBoot, KindWorkload, KindPrice, KindSecurity, KindMetadata, KindPrediction, KindTask, KindAcceptance, KindProposal, KindEndpointState)

// ClaimScope is Apron's claim scope set plus narwhal's namespaced one.
type ClaimScope string

const (
	ScopeConfig             ClaimScope = "config"
	ScopeBoot               ClaimScope = "boot"
	ScopeMemory             ClaimScope = "memory"
	ScopeRemediation        ClaimScope = "remediation"
	ScopeServingPerformance ClaimScope = "serving_performance"
	ScopeTaskOutcome        ClaimScope = "task_outcome"
	ScopeOutcomeEconomics   ClaimScope = "outcome_economics"
	ScopeKVTransfer         ClaimScope = "narwhal:kv_transfer"
)

var scopes = set(ScopeConfig, ScopeBoot, ScopeMemory, ScopeRemediation, ScopeServingPerformance, ScopeTaskOutcome, ScopeOutcomeEconomics, ScopeKVTransfer)

// EpistemicStatus says how the claim is known.
type EpistemicStatus string

const (
	Derived          EpistemicStatus = "derived"
	ProvenConstraint EpistemicStatus = "proven_constraint"
	Predicted        EpistemicStatus = "predicted"
	Measured         EpistemicStatus = "measured"
)

var statuses = set(Derived, ProvenConstraint, Predicted, Measured)

// Subject keys the tier rules match on.
const (
	SubjectArtifact      = "artifact"
	SubjectHardwareClass = "hardware_class"
	SubjectEndpoint      = "endpoint"
	SubjectApplication   = "application"
	SubjectSolution      = "solution"
	// SubjectTaskSuite names the accepted task suite revision a task
	// record scores; SubjectWindow the journal window of a serving record;
	// SubjectPair the directed engine pair of a KV-transfer record.
	SubjectTaskSuite = "task_suite"
	SubjectWindow    = "window"
	SubjectPair      = "pair"
	// SubjectRevision and SubjectRevisionKind name what a proposal or an
	// acceptance is about; SubjectPrincipal who proposed or accepted it.
	SubjectRevision     = "revision"
	SubjectRevisionKind = "revision_kind"
	SubjectPrincipal    = "principal"
)

// Verdicts the tier rules read.
const (
	VerdictFits       = "fits"
	VerdictHealthy    = "healthy"
	VerdictMeetsSLO   = "meets_slo"
	VerdictPass       = "pass"
	VerdictAccepted   = "accepted"
	VerdictReproduced = "reproduced"
	VerdictFailed     = "failed"
	VerdictProposed   = "proposed"
	VerdictFail       = "fail"
)

func set[T comparable](vs ...T) map[T]bool {
	m := make(map[T]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}
