package queue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence"
)

// Gap is the evidence gap of an item, worst first.
type Gap string

const (
	GapMissing   Gap = "missing"   // no measured record in the item's scope
	GapContested Gap = "contested" // measured records disagree across levels
	GapStale     Gap = "stale"     // every measured record has expired
	GapCovered   Gap = "covered"   // fresh, uncontested coverage exists
)

func gapRank(g Gap) int {
	return slices.Index([]Gap{GapMissing, GapContested, GapStale, GapCovered}, g)
}

// Item is one queue entry: merged candidates for one fingerprint and
// claim scope, with the gap and every figure its position rests on.
type Item struct {
	Position     int                 `json:"position"` // 1-based among eligible items; 0 when held
	DedupKey     string              `json:"dedup_key"`
	ClaimScope   evidence.ClaimScope `json:"claim_scope"`
	Names        []string            `json:"names"`
	Sources      []Source            `json:"sources"`
	References   []string            `json:"references"`
	Gap          Gap                 `json:"gap"`
	GapReason    string              `json:"gap_reason"`
	FailureValue int                 `json:"unresolved_failures"`
	Uncertainty  float64             `json:"uncertainty"`
	Breadth      int                 `json:"signal_breadth"` // distinct origins, popularity counters excluded
	Signals      []Signal            `json:"signals"`
	Eligible     bool                `json:"eligible"`
	Why          []string            `json:"why"`      // which inputs put it here
	AheadBy      string              `json:"ahead_by"` // the key that orders it before the next item
}

// Evidence is what the queue judges gaps against.
type Evidence struct {
	Records          []evidence.Record
	Freshness        evidence.FreshnessInput
	ResolvedFailures map[string]bool // failure fingerprints a Fixed remediation covers
}

// Build merges, assesses and ranks candidates. queued is in order; held
// lists signal items that are not eligible, each with the reason.
func Build(cands []Candidate, ev Evidence) (queued, held []Item, err error) {
	for i, c := range cands {
		if err := c.Validate(); err != nil {
			return nil, nil, fmt.Errorf("candidates[%d]: %w", i, err)
		}
	}
	for _, it := range merge(cands, ev) {
		if it.Eligible {
			queued = append(queued, it)
		} else {
			held = append(held, it)
		}
	}
	Rank(queued)
	return queued, held, nil
}

// Rank orders items in place by evidence gap, unresolved failures,
// uncertainty and signal breadth, then by fingerprint, and explains each
// position. It never reads a popularity counter.
func Rank(items []Item) {
	slices.SortFunc(items, compare)
	for i := range items {
		items[i].Position = i + 1
		items[i].AheadBy = ""
		if i+1 < len(items) {
			items[i].AheadBy = decidingKey(items[i], items[i+1])
		}
	}
}

func compare(a, b Item) int {
	return cmp.Or(
		cmp.Compare(gapRank(a.Gap), gapRank(b.Gap)),
		cmp.Compare(b.FailureValue, a.FailureValue),
		cmp.Compare(b.Uncertainty, a.Uncertainty),
		cmp.Compare(b.Breadth, a.Breadth),
		strings.Compare(a.DedupKey, b.DedupKey),
		strings.Compare(string(a.ClaimScope), string(b.ClaimScope)),
	)
}

// decidingKey names the first ranking key on which a and b differ.
func decidingKey(a, b Item) string {
	switch {
	case a.Gap != b.Gap:
		return fmt.Sprintf("evidence gap (%s before %s)", a.Gap, b.Gap)
	case a.FailureValue != b.FailureValue:
		return fmt.Sprintf("unresolved failures (%d over %d)", a.FailureValue, b.FailureValue)
	case a.Uncertainty != b.Uncertainty:
		return fmt.Sprintf("uncertainty (%g over %g)", a.Uncertainty, b.Uncertainty)
	case a.Breadth != b.Breadth:
		return fmt.Sprintf("signal breadth (%d origins over %d; popularity counters not counted)", a.Breadth, b.Breadth)
	}
	return "fingerprint order (equal on every evidence key)"
}
