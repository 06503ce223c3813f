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
	// SourceDigest is the source record: what was read, where, and its
	// digests (Result.SourceRecord).
	SourceDigest string
	Tier         evidence.Decision
	Priors       []execfp.Result
}

// Save writes the plan's record to st and derives its tier from the
// records st holds about the plan's subject, found through the store's
// subject index (reading every record made a plan cost seconds on a
// large store). Nothing is written when the record cannot be made.
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
	src, err := res.SourceRecord(clock)
	if err != nil {
		return Outcome{}, err
	}
	sd, err := st.PutRecord(src)
	if err != nil {
		return Outcome{}, fmt.Errorf("evidence store %s: %w", st.Root, err)
	}
	now := evidence.FreshnessInput{Now: clock.Now()}
	q := evidence.TierQuery{Artifact: res.ArtifactSubject(), HardwareClass: res.HardwareClass(),
		MarginBytes: float64(res.StatedMargin), Freshness: now}
	records, err := load(st, q)
	if err != nil {
		return Outcome{}, err
	}
	tier, err := evidence.Derive(records, q)
	if err != nil {
		return Outcome{}, fmt.Errorf("evidence store %s: tier: %w", st.Root, err)
	}
	return Outcome{Record: rec, RecordDigest: d, SourceDigest: sd, Tier: tier, Priors: priors(records, res, now)}, nil
}

// load reads the records q's tier and the plan's priors can depend on.
// Every tier rule (evidence.Derive) matches a record on the artifact, or
// on the endpoint, application or solution when q names one; the
// conflict rule groups records by their whole subject, so a group is
// either wholly inside this set or irrelevant. Priors need the artifact's
// records. The derived tier is therefore the one a full scan gives.
func load(st *store.Store, q evidence.TierQuery) ([]evidence.Record, error) {
	found, err := st.Find(tierTerms(q)...)
	if err != nil {
		return nil, fmt.Errorf("evidence store %s: %w", st.Root, err)
	}
	out := make([]evidence.Record, len(found))
	for i, f := range found {
		out[i] = f.Record
	}
	return out, nil
}

// tierTerms always includes the artifact term, even when empty: priors
// then need the records without one, which Find reads by a full scan.
func tierTerms(q evidence.TierQuery) []store.Term {
	terms := []store.Term{store.SubjectTerm(evidence.SubjectArtifact, q.Artifact)}
	for _, t := range []struct{ key, value string }{
		{evidence.SubjectEndpoint, q.Endpoint}, {evidence.SubjectApplication, q.Application}, {evidence.SubjectSolution, q.Solution},
	} {
		if t.value != "" {
			terms = append(terms, store.SubjectTerm(t.key, t.value))
		}
	}
	return terms
}

// priors matches the store's measurements of the same artifact and
// hardware class against the planned execution: an exact fingerprint
// match is shown as matching prior evidence, anything else only informs
// the prediction (the measurement boundary, reference/evidence.md §2.9).
func priors(records []evidence.Record, res Result, fresh evidence.FreshnessInput) []execfp.Result {
	var out []execfp.Result
	for _, p := range priorCandidates(records, res) {
		m, err := execfp.Match(p, res.Execution, execfp.Policy{Freshness: fresh})
		if err == nil {
			out = append(out, m)
		}
	}
	return out
}

// priorCandidates are the measurements of res's artifact that carry an
// execution input, in record order.
func priorCandidates(records []evidence.Record, res Result) []execfp.Prior {
	var out []execfp.Prior
	for _, r := range records {
		if r.EpistemicStatus != evidence.Measured || r.Subject[evidence.SubjectArtifact] != res.ArtifactSubject() {
			continue
		}
		if in, ok := fromDisplay(r.Display[DisplayExecution]); ok {
			out = append(out, execfp.Prior{Record: r, Input: in})
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
