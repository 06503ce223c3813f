package planner

import (
	"encoding/json"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/execfp"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// DisplayExecution is the display key under which records carry the
// execution fingerprint input they belong to; measured records carry it
// so a later plan can tell an exact prior from a related one.
const DisplayExecution = "execution"

// Outcome is a stored plan: its record, the tier the store's records
// give it, and what the store already measured of related executions.
type Outcome struct {
	Record       evidence.Record
	RecordDigest string
	Tier         evidence.Decision
	Priors       []execfp.Result
}

// Save writes the plan's record to st and derives its tier from every
// record st holds. Nothing is written when the record cannot be made.
func Save(st *store.Store, res Result, clock ports.Clock) (Outcome, error) {
	rec, err := res.Record(clock)
	if err != nil {
		return Outcome{}, err
	}
	exec, err := toDisplay(res.Execution)
	if err != nil {
		return Outcome{}, err
	}
	rec.Display[DisplayExecution] = exec
	d, err := st.PutRecord(rec)
	if err != nil {
		return Outcome{}, fmt.Errorf("evidence store %s: %w", st.Root, err)
	}
	records, err := load(st)
	if err != nil {
		return Outcome{}, err
	}
	now := evidence.FreshnessInput{Now: clock.Now()}
	tier, err := evidence.Derive(records, evidence.TierQuery{Artifact: res.ArtifactSubject(), HardwareClass: res.HardwareClass(),
		MarginBytes: float64(res.StatedMargin), Freshness: now})
	if err != nil {
		return Outcome{}, fmt.Errorf("evidence store %s: tier: %w", st.Root, err)
	}
	return Outcome{Record: rec, RecordDigest: d, Tier: tier, Priors: priors(records, res, now)}, nil
}

func load(st *store.Store) ([]evidence.Record, error) {
	names, err := st.List()
	if err != nil {
		return nil, fmt.Errorf("evidence store %s: %w", st.Root, err)
	}
	out := make([]evidence.Record, 0, len(names))
	for _, d := range names {
		r, _, err := st.Get(d)
		if err != nil {
			return nil, fmt.Errorf("evidence store %s: %w", st.Root, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// priors matches the store's measurements of the same artifact and
// hardware class against the planned execution: an exact fingerprint
// match is shown as matching prior evidence, anything else only informs
// the prediction (the measurement boundary, reference/evidence.md §2.9).
func priors(records []evidence.Record, res Result, fresh evidence.FreshnessInput) []execfp.Result {
	var out []execfp.Result
	for _, r := range records {
		if r.EpistemicStatus != evidence.Measured || r.Subject[evidence.SubjectArtifact] != res.ArtifactSubject() {
			continue
		}
		in, ok := fromDisplay(r.Display[DisplayExecution])
		if !ok {
			continue
		}
		m, err := execfp.Match(execfp.Prior{Record: r, Input: in}, res.Execution, execfp.Policy{Freshness: fresh})
		if err == nil {
			out = append(out, m)
		}
	}
	return out
}

func toDisplay(in execfp.Input) (map[string]any, error) {
	b, _, err := execfp.Encode(in)
	if err != nil {
		return nil, fmt.Errorf("execution fingerprint: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("execution fingerprint: %w", err)
	}
	return m, nil
}

func fromDisplay(v any) (execfp.Input, bool) {
	if v == nil {
		return execfp.Input{}, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return execfp.Input{}, false
	}
	var in execfp.Input
	if err := json.Unmarshal(b, &in); err != nil {
		return execfp.Input{}, false
	}
	return in, true
}
