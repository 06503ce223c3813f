package planner

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
	"github.com/narwhal-go/narwhal/internal/evidence/quant"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/version"
)

// The quantization candidate graph (reference/evidence.md §2.6): every
// artifact of one model lineage the operator has locally — checkpoint,
// publisher quantizations, third-party siblings — as ArtifactSpecs, the
// runtime transforms the engine could apply to each, and only the
// relations their own evidence supports (quant.Relate: structure from
// lineage, tokenizer from equal digests; names prove nothing).

// Candidates document.
const (
	CandidatesSchema        = "narwhal.quant-candidates"
	CandidatesSchemaVersion = 1
	// QuantityCandidates marks the stored graph.
	QuantityCandidates = "quantization_candidates"
)

// CandidateGraph is the graph of the artifacts in some directories.
type CandidateGraph struct {
	Schema        string                   `json:"schema"`
	SchemaVersion int                      `json:"schema_version"`
	Candidates    []Candidate              `json:"candidates"` // by fingerprint
	Relations     []quant.ArtifactRelation `json:"relations"`
	Refused       []string                 `json:"refused"` // directories that could not be a candidate, and why
}

// Candidate is one artifact and the runtime transform the engine could
// apply to it.
type Candidate struct {
	Dir          string                      `json:"dir"`
	Fingerprint  string                      `json:"fingerprint"`
	Spec         quant.ArtifactSpec          `json:"spec"`
	Support      quant.Verdict               `json:"support"`
	Runtime      *quant.RuntimeTransformSpec `json:"runtime_transform"` // nil when none applies
	RuntimeQuant *quant.QuantizationSpec     `json:"runtime_quantization"`
}

// Candidates builds the graph of dirs for engineVersion. A directory
// whose identity does not resolve (no SHA256SUMS nor Hugging Face cache
// layout, hashAll off) is refused by name: identity comes from resolved
// contents only.
func Candidates(dirs []string, engineVersion string, hashAll bool, clock ports.Clock) (CandidateGraph, error) {
	g := CandidateGraph{Schema: CandidatesSchema, SchemaVersion: CandidatesSchemaVersion, Candidates: []Candidate{},
		Relations: []quant.ArtifactRelation{}, Refused: []string{}}
	for _, dir := range dirs {
		c, err := candidate(dir, engineVersion, hashAll, clock)
		if err != nil {
			g.Refused = append(g.Refused, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		g.Candidates = append(g.Candidates, c)
	}
	sort.Slice(g.Candidates, func(i, j int) bool { return g.Candidates[i].Fingerprint < g.Candidates[j].Fingerprint })
	for i := range g.Candidates {
		for j := i + 1; j < len(g.Candidates); j++ {
			rs, err := quant.Relate(g.Candidates[i].Spec, g.Candidates[j].Spec)
			if err != nil {
				return g, err
			}
			g.Relations = append(g.Relations, rs...)
		}
	}
	return g, nil
}

func candidate(dir, engineVersion string, hashAll bool, clock ports.Clock) (Candidate, error) {
	h, err := artifact.ReadHeaders(dir)
	if err != nil {
		return Candidate{}, err
	}
	cfg, err := artifact.ReadConfig(dir)
	if err != nil || cfg == nil {
		return Candidate{}, fmt.Errorf("no readable config.json (%v)", err)
	}
	q, v, err := detectQuant(dir, cfg, h)
	if err != nil {
		return Candidate{}, err
	}
	obs, _, err := identify(Request{ModelDir: dir, HashAll: hashAll}, h, cfg, clock)
	if err != nil {
		return Candidate{}, err
	}
	qc, found, err := artifact.ReadQuantConfig(dir, cfg)
	if err != nil {
		return Candidate{}, err
	}
	in := quant.SpecInputs{Observation: obs, Headers: h, Config: cfg, Quantization: q}
	if found {
		in.QuantConfig = &qc
	}
	spec, err := quant.NewArtifactSpec(in)
	if err != nil {
		return Candidate{}, err
	}
	fp, err := quant.Fingerprint(spec)
	if err != nil {
		return Candidate{}, err
	}
	c := Candidate{Dir: dir, Fingerprint: fp, Spec: spec, Support: v}
	if !found && engineVersion != "" {
		if rt, rq, rv := quant.RuntimeFP8(engineVersion, nil, h); rv.Support != quant.Unsupported {
			c.Runtime, c.RuntimeQuant = &rt, &rq
		}
	}
	return c, nil
}

// Record is the graph as a metadata record of each lineage it holds
// (subject: the lineage fingerprints, sorted, joined), so plan finds it
// by its own artifact's lineage.
func (g CandidateGraph) Record(clock ports.Clock) (evidence.Record, error) {
	b, err := canon.Marshal(g)
	if err != nil {
		return evidence.Record{}, fmt.Errorf("candidate graph: %w", err)
	}
	var display map[string]any
	if err := json.Unmarshal(b, &display); err != nil {
		return evidence.Record{}, err
	}
	verdict := fmt.Sprintf("candidates=%d,relations=%d", len(g.Candidates), len(g.Relations))
	subject := map[string]string{}
	for _, c := range g.Candidates {
		subject["lineage:"+c.Spec.Lineage.TensorSetDigest] = "member"
	}
	if len(subject) == 0 {
		subject["lineage:none"] = "member"
	}
	rec := evidence.Record{Kind: evidence.KindMetadata, ClaimScope: evidence.ScopeConfig, EpistemicStatus: evidence.Derived,
		Level: evidence.MaintainerLabMeasured, Subject: subject,
		Claim:      evidence.Claim{Quantity: QuantityCandidates, Verdict: &verdict},
		Engine:     evidence.Engine{Name: "none", Version: "", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "narwhal evidence candidates", ProducerVersion: version.Version, Inputs: []string{}},
		Display:    display}
	return evidence.Stamp(rec, clock), nil
}

// StoredCandidates finds the newest stored candidate graph that holds an
// artifact of res's lineage, and returns its record digest and
// candidates; "" and nil when the store has none.
func StoredCandidates(st *store.Store, res Result) (string, []Candidate, error) {
	found, err := st.Find(store.SubjectTerm("lineage:"+res.Lineage.TensorSetDigest, "member"))
	if err != nil {
		return "", nil, fmt.Errorf("evidence store %s: %w", st.Root, err)
	}
	best, at := "", ""
	var g CandidateGraph
	for _, f := range found {
		if f.Record.Claim.Quantity != QuantityCandidates || f.Record.ObservedAt < at {
			continue
		}
		b, err := json.Marshal(f.Record.Display)
		if err != nil {
			return "", nil, err
		}
		var next CandidateGraph
		if err := json.Unmarshal(b, &next); err != nil {
			return "", nil, fmt.Errorf("candidate graph %s: %w", f.Digest, err)
		}
		best, at, g = f.Digest, f.Record.ObservedAt, next
	}
	return best, g.Candidates, nil
}
