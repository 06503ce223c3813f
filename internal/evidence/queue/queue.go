// Package queue is the day-one measurement queue (ADR-006 queue policy as
// amended by ADR-002; reference §2.18): what to measure next, ordered by
// evidence gap, from accepted requests and locally observed failed plans,
// which enter directly, and from attributed signals, which are
// deduplicated by resolved artifact (or lineage) fingerprint and must be
// corroborated. A popularity counter such as Hugging Face 30-day downloads
// is one labelled signal at most; it never makes an item eligible and
// never breaks a tie.
//
// Ranking is pure and deterministic: the same candidates and evidence give
// the same order and the same explanations.
package queue

import (
	"fmt"
	"slices"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
)

// Source says how an item entered the queue.
type Source string

const (
	AcceptedRequest Source = "accepted_request"  // an accepted DecisionRequest: enters directly
	LocalFailedPlan Source = "local_failed_plan" // a failed plan observed here: enters directly
	FromSignals     Source = "signal"            // external signals: eligible only when corroborated
)

func (s Source) direct() bool { return s == AcceptedRequest || s == LocalFailedPlan }

// sourceRank orders merged sources: a direct entry outranks signals.
func sourceRank(s Source) int {
	return slices.Index([]Source{AcceptedRequest, LocalFailedPlan, FromSignals}, s)
}

// Signal is one attributed, dated observation of demand.
type Signal struct {
	Origin      string  `json:"origin"` // "vllm_release", "recipes", "hf_downloads_30d", …
	Label       string  `json:"label"`  // shown with the item
	Value       float64 `json:"value"`
	ObservedAt  string  `json:"observed_at"`
	Attribution string  `json:"attribution"` // URL or record digest
}

// popularityCounters are origins that count downloads or stars: labelled,
// never sufficient, never a tie-breaker (INV-36).
var popularityCounters = map[string]string{
	"hf_downloads_30d": "Hugging Face 30-day downloads (counting varies by library and query file; users are not deduplicated)",
}

// IsPopularity reports whether origin is a popularity counter.
func IsPopularity(origin string) bool { _, ok := popularityCounters[origin]; return ok }

// Candidate is one input row: something that may need measuring.
type Candidate struct {
	Source      Source              `json:"source"`
	Name        string              `json:"name"`     // display only
	Artifact    string              `json:"artifact"` // resolved artifact identity digest (1220…), when resolved
	Lineage     string              `json:"lineage"`  // lineage fingerprint, when the artifact is not resolved
	Solution    string              `json:"solution"` // broken-plan digest, for a failed plan with neither
	ClaimScope  evidence.ClaimScope `json:"claim_scope"`
	Uncertainty float64             `json:"uncertainty"` // relative width of the prediction band, or error
	Failures    []string            `json:"failures"`    // failure fingerprint digests observed for it
	Reference   string              `json:"reference"`   // acceptance or failure record digest of a direct entry
	Signals     []Signal            `json:"signals"`
}

// DedupKey is the identity items are merged on: the artifact identity,
// else the lineage fingerprint, else the failed plan. The forms match the
// record subjects narwhal plan writes.
func (c Candidate) DedupKey() string {
	switch {
	case c.Artifact != "":
		return c.Artifact
	case c.Lineage != "":
		return "unresolved:lineage:" + c.Lineage
	}
	return "solution:" + c.Solution
}

// Validate refuses rows the policy cannot use: an unattributed or undated
// signal, a direct entry without its record, an item with no identity.
func (c Candidate) Validate() error {
	switch {
	case sourceRank(c.Source) < 0:
		return fmt.Errorf("source %q: want accepted_request, local_failed_plan or signal", c.Source)
	case c.Artifact == "" && c.Lineage == "" && c.Solution == "":
		return fmt.Errorf("%q: give artifact (resolved identity digest), lineage or solution: signals are deduplicated by fingerprint, never by name", c.Name)
	case c.Artifact != "" && !canon.IsDigest(c.Artifact):
		return fmt.Errorf("%q: artifact %q is not a 1220… digest", c.Name, c.Artifact)
	case c.Source.direct() && c.Reference == "":
		return fmt.Errorf("%q: a %s enters directly only with its record digest (reference)", c.Name, c.Source)
	case c.Uncertainty < 0:
		return fmt.Errorf("%q: uncertainty %v is negative", c.Name, c.Uncertainty)
	}
	for i, s := range c.Signals {
		if s.Origin == "" || s.ObservedAt == "" || s.Attribution == "" {
			return fmt.Errorf("%q: signals[%d]: origin, observed_at and attribution are required (INV-36: signals are attributed and dated)", c.Name, i)
		}
	}
	return nil
}
