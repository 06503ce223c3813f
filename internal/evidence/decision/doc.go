// Package decision holds the revisions that must be accepted before they
// drive anything (ADR-006 §15, ADR-011): a DecisionRequest (objective,
// SLO, serving workload, artifact policy) and a task suite. A revision is
// immutable: its identity is the digest of its canonical bytes, so a
// changed file is a new revision that needs a new acceptance.
//
// The package is deterministic: time reaches it only through a
// ports.Clock, and documents are canonicalized before they are digested.
package decision

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
)

// Document schemas.
const (
	RequestSchema = "narwhal.decision-request"
	SuiteSchema   = "narwhal.task-suite"
	SchemaVersion = 1
)

// RevisionKind names what a revision is.
type RevisionKind string

// The revision kinds.
const (
	KindRequest RevisionKind = "decision_request"
	KindSuite   RevisionKind = "task_suite"
)

// MinSamplesFloor is the fewest scored offers a serving window needs
// before it can claim serving_verified, whatever a request accepts.
const MinSamplesFloor = 20

// Request is a DecisionRequest: what the operator wants from an endpoint.
type Request struct {
	Schema         string         `json:"schema"`
	SchemaVersion  int            `json:"schema_version"`
	Model          string         `json:"model"`
	Objective      string         `json:"objective"`
	SLO            SLO            `json:"slo"`
	Workload       Workload       `json:"workload"`
	ArtifactPolicy ArtifactPolicy `json:"artifact_policy"`
}

// SLO is the accepted per-request rule and the attainment target: the
// lower bound of a 95 % Wilson interval on met/offered must reach it.
type SLO struct {
	TTFTSeconds float64 `json:"ttft_s"`
	TPOTSeconds float64 `json:"tpot_s"`
	Attainment  float64 `json:"attainment"`
}

// Workload is the accepted serving-workload envelope; a window outside it
// is stored but verifies nothing.
type Workload struct {
	MaxInputTokens  int     `json:"max_input_tokens"`
	MaxOutputTokens int     `json:"max_output_tokens"`
	MaxRatePerS     float64 `json:"max_rate_per_s"`
	MinSamples      int     `json:"min_samples"`
}

// ArtifactPolicy says which artifact identity the endpoint must serve;
// empty accepts any resolved identity, never an unresolved one.
type ArtifactPolicy struct {
	Artifact string `json:"artifact"`
}

// Suite is a task suite: cases, each with a scorer, and the accepted
// quality floor (the fraction of cases that must pass).
type Suite struct {
	Schema        string  `json:"schema"`
	SchemaVersion int     `json:"schema_version"`
	Name          string  `json:"name"`
	Model         string  `json:"model"`
	Kind          string  `json:"kind"` // "cases" or "pd_equivalence"
	QualityFloor  float64 `json:"quality_floor"`
	Cases         []Case  `json:"cases"`
}

// Suite kinds.
const (
	SuiteCases         = "cases"
	SuitePDEquivalence = "pd_equivalence"
)

// Case is one prompt. Expected is the answer (exact, contains), a pattern
// (regex), or unused (json_schema uses Schema; pd_equivalence compares
// with the aggregated answer).
type Case struct {
	ID        string      `json:"id"`
	Prompt    string      `json:"prompt"`
	MaxTokens int         `json:"max_tokens"`
	Scorer    string      `json:"scorer"`
	Expected  string      `json:"expected"`
	Schema    *JSONSchema `json:"schema"`
}

// Scorers.
const (
	ScoreExact      = "exact"
	ScoreRegex      = "regex"
	ScoreContains   = "contains"
	ScoreJSONSchema = "json_schema"
	ScoreEqual      = "equal_aggregated" // pd_equivalence
)

// JSONSchema is the subset of JSON Schema the json_schema scorer checks:
// type, required, properties and enum.
type JSONSchema struct {
	Type       string                 `json:"type"`
	Required   []string               `json:"required"`
	Properties map[string]*JSONSchema `json:"properties"`
	Enum       []string               `json:"enum"`
}

// ParseRequest decodes and validates a DecisionRequest and returns it with
// its canonical bytes.
func ParseRequest(raw []byte) (Request, []byte, error) {
	return parse[Request](raw, "decision request", Request.validate)
}

// ParseSuite decodes and validates a task suite and returns it with its
// canonical bytes.
func ParseSuite(raw []byte) (Suite, []byte, error) {
	return parse[Suite](raw, "task suite", Suite.validate)
}

func parse[T any](raw []byte, what string, validate func(T) error) (T, []byte, error) {
	var v T
	if err := store.StrictDecode(raw, &v); err != nil {
		return v, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := validate(v); err != nil {
		return v, nil, fmt.Errorf("%s: %w", what, err)
	}
	b, err := canon.Marshal(v)
	return v, b, err
}

func (r Request) validate() error {
	switch {
	case r.Schema != RequestSchema || r.SchemaVersion != SchemaVersion:
		return fmt.Errorf("schema %q version %d: want %q version %d", r.Schema, r.SchemaVersion, RequestSchema, SchemaVersion)
	case r.Model == "":
		return fmt.Errorf("model is empty: name the served model the request is about")
	case r.Objective == "":
		return fmt.Errorf("objective is empty: say what the endpoint is chosen for (for example max_goodput)")
	case !(r.SLO.TTFTSeconds > 0) || r.SLO.TPOTSeconds < 0:
		return fmt.Errorf("slo.ttft_s must be > 0 and slo.tpot_s ≥ 0")
	case !(r.SLO.Attainment > 0 && r.SLO.Attainment <= 1):
		return fmt.Errorf("slo.attainment %v: want a fraction in (0, 1]", r.SLO.Attainment)
	case r.Workload.MinSamples < MinSamplesFloor:
		return fmt.Errorf("workload.min_samples %d: at least %d scored offers are needed before a window can verify serving", r.Workload.MinSamples, MinSamplesFloor)
	case r.Workload.MaxInputTokens <= 0 || r.Workload.MaxOutputTokens <= 0 || !(r.Workload.MaxRatePerS > 0):
		return fmt.Errorf("workload.max_input_tokens, max_output_tokens and max_rate_per_s must be > 0: they bound the accepted envelope")
	}
	return nil
}

func (s Suite) validate() error {
	if err := s.validateFields(); err != nil {
		return fmt.Errorf("%q: %w", s.Name, err)
	}
	return nil
}

func (s Suite) validateFields() error {
	switch {
	case s.Schema != SuiteSchema || s.SchemaVersion != SchemaVersion:
		return fmt.Errorf("schema %q version %d: want %q version %d", s.Schema, s.SchemaVersion, SuiteSchema, SchemaVersion)
	case s.Name == "" || s.Model == "":
		return fmt.Errorf("name and model are required")
	case s.Kind != SuiteCases && s.Kind != SuitePDEquivalence:
		return fmt.Errorf("kind %q: want %q or %q", s.Kind, SuiteCases, SuitePDEquivalence)
	case !(s.QualityFloor > 0 && s.QualityFloor <= 1):
		return fmt.Errorf("quality_floor %v: want a fraction in (0, 1]", s.QualityFloor)
	case len(s.Cases) == 0:
		return fmt.Errorf("cases is empty")
	}
	for i, c := range s.Cases {
		if err := s.checkCase(c); err != nil {
			return fmt.Errorf("cases[%d] (%s): %w", i, c.ID, err)
		}
	}
	return nil
}

func (s Suite) checkCase(c Case) error {
	if c.ID == "" || c.Prompt == "" || c.MaxTokens <= 0 {
		return fmt.Errorf("id, prompt and max_tokens > 0 are required")
	}
	if s.Kind == SuitePDEquivalence {
		if c.Scorer != ScoreEqual {
			return fmt.Errorf("scorer %q: a pd_equivalence case is scored %q", c.Scorer, ScoreEqual)
		}
		return nil
	}
	switch c.Scorer {
	case ScoreExact, ScoreContains:
	case ScoreRegex:
		if _, err := regexp.Compile(c.Expected); err != nil {
			return fmt.Errorf("expected is not a valid regex: %w", err)
		}
	case ScoreJSONSchema:
		if c.Schema == nil {
			return fmt.Errorf("scorer json_schema needs schema")
		}
	default:
		return fmt.Errorf("scorer %q: want exact, regex, contains or json_schema", c.Scorer)
	}
	return nil
}

// KindOf reads a document's schema to tell a request from a suite.
func KindOf(raw []byte) (RevisionKind, error) {
	var h struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", fmt.Errorf("not a JSON object: %w", err)
	}
	switch h.Schema {
	case RequestSchema:
		return KindRequest, nil
	case SuiteSchema:
		return KindSuite, nil
	}
	return "", fmt.Errorf("schema %q: want %q or %q", h.Schema, RequestSchema, SuiteSchema)
}
