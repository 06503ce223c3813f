package serving

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/version"
)

// Verdicts of a serving record.
const (
	VerdictInsufficient    = "insufficient_samples"
	VerdictOutsideWorkload = "outside_workload"
	VerdictMissesSLO       = "misses_slo"
	Quantity               = "slo_attainment"
	Producer               = "narwhal evidence from-journal"
)

// Input is what serving records are made from: one Window per journal,
// each over the fleet's engines.
type Input struct {
	Windows        []*Window
	Bindings       []Binding
	Request        decision.Request
	RequestDigest  string // the accepted revision
	ProductionMode bool
}

// Result is the records and why some windows made none.
type Result struct {
	Records []evidence.Record
	Notes   []string
}

// Records builds one record per endpoint fingerprint that served in the
// windows (reference/evidence.md §4.4: a serving record is of one endpoint
// fingerprint): the replicas of one fingerprint combine, a request
// counting once however many of its replicas it touched, with each
// replica's own counts shown beside (per_engine). A request never placed
// counts in the denominator of every fingerprint that served in the
// window — the fleet's — and makes no record for an idle engine; only a
// window in which nothing was placed charges it to the fleet's bound
// fingerprints. A generation that cannot be bound to a boot record makes
// no record: its note says why. Replicas whose own verdicts disagree are
// named in a note, never decided by iid.
func Records(in Input, clock ports.Clock) (Result, error) {
	f := newFolder(in)
	for _, w := range in.Windows {
		f.window(w)
	}
	f.chargeUnplaced()
	var res Result
	res.Notes = f.notes
	for _, k := range f.sortedKeys() {
		g := f.groups[k]
		r, err := record(in, g, clock)
		if err != nil {
			return res, fmt.Errorf("serving record for endpoint %s: %w", k, err)
		}
		res.Records = append(res.Records, r)
		res.Notes = append(res.Notes, g.disagreement(in.Request)...)
	}
	return res, nil
}

// Verdict judges stats against the accepted request.
func Verdict(s Stats, req decision.Request) string {
	w := req.Workload
	switch {
	case s.Offered < max(w.MinSamples, decision.MinSamplesFloor):
		return VerdictInsufficient
	case s.MaxInputLen > w.MaxInputTokens || s.MaxOutLen > w.MaxOutputTokens || s.RatePerS > w.MaxRatePerS:
		return VerdictOutsideWorkload
	case s.AttainmentLower < req.SLO.Attainment:
		return VerdictMissesSLO
	}
	return evidence.VerdictMeetsSLO
}

func record(in Input, g *group, clock ports.Clock) (evidence.Record, error) {
	s := g.acc.finish()
	verdict := Verdict(s, in.Request)
	stats, err := toMap(s)
	if err != nil {
		return evidence.Record{}, err
	}
	iids := g.iids()
	_, window, err := canon.MarshalDigest(map[string]any{"endpoint": g.endpoint, "engines": iids,
		"request": in.RequestDigest, "runs_first_arrived": g.acc.firstArrived, "runs_last_arrived": g.acc.lastAr})
	if err != nil {
		return evidence.Record{}, err
	}
	att := s.Attainment
	inputs := append(g.bootRecords(), in.RequestDigest)
	sort.Strings(inputs)
	perEngine, err := g.perEngine(in.Request)
	if err != nil {
		return evidence.Record{}, err
	}
	r := evidence.Record{Kind: evidence.KindWorkload, ClaimScope: evidence.ScopeServingPerformance, EpistemicStatus: evidence.Measured,
		Level: evidence.MaintainerLabMeasured,
		Subject: map[string]string{evidence.SubjectEndpoint: g.endpoint, evidence.SubjectApplication: in.RequestDigest,
			evidence.SubjectWindow: window},
		Claim:      evidence.Claim{Quantity: Quantity, Verdict: &verdict, Value: &att, Unit: "fraction"},
		Engine:     evidence.Engine{Name: "vllm", Version: g.version, Packages: []string{}},
		Provenance: evidence.Provenance{Producer: Producer, ProducerVersion: version.Version, Inputs: inputs},
		Display: map[string]any{"engine_iids": iids, "per_engine": perEngine, "serving": stats,
			"production_mode": in.ProductionMode, "slo": in.Request.SLO, "workload_envelope": in.Request.Workload}}
	return evidence.Stamp(r, clock), nil
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

func appendOnce(s []string, x string) []string {
	for _, y := range s {
		if y == x {
			return s
		}
	}
	return append(s, x)
}
