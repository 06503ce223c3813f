package serving

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/journal"
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

type groupKey struct{ iid, endpoint string }

type group struct {
	b   Binding
	acc *accumulator
}

// Records builds one record per engine execution that served in the
// windows. A generation that cannot be bound to a boot record makes no
// record: its note says why.
func Records(in Input, clock ports.Clock) (Result, error) {
	groups := map[groupKey]*group{}
	var res Result
	for _, w := range in.Windows {
		w.compact()
		var buf []int16
		for i := range w.rows {
			r := &w.rows[i]
			if terminals[r.terminal] == journal.TerminalInvalid {
				continue // the client's own mistake is no offer to any engine
			}
			for _, e := range w.touched(r, buf) {
				g := w.gens[e][w.epochs[r.epoch][e]]
				b, err := bind(g, in.Bindings)
				if err != nil {
					res.Notes = appendOnce(res.Notes, err.Error())
					continue
				}
				k := groupKey{g.iid, b.Endpoint}
				if groups[k] == nil {
					groups[k] = &group{b: b, acc: newAccumulator()}
				}
				groups[k].acc.add(w.runs[r.run], r, in.Request.SLO)
			}
		}
	}
	keys := make([]groupKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].iid < keys[j].iid || keys[i].iid == keys[j].iid && keys[i].endpoint < keys[j].endpoint
	})
	for _, k := range keys {
		r, err := record(in, groups[k], clock)
		if err != nil {
			return res, fmt.Errorf("serving record for engine %s: %w", k.iid, err)
		}
		res.Records = append(res.Records, r)
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
	_, window, err := canon.MarshalDigest(map[string]any{"engine": g.b.IID, "endpoint": g.b.Endpoint,
		"request": in.RequestDigest, "runs_first_arrived": g.acc.firstArrived, "runs_last_arrived": g.acc.lastAr})
	if err != nil {
		return evidence.Record{}, err
	}
	att := s.Attainment
	inputs := []string{g.b.BootRecord, in.RequestDigest}
	sort.Strings(inputs)
	r := evidence.Record{Kind: evidence.KindWorkload, ClaimScope: evidence.ScopeServingPerformance, EpistemicStatus: evidence.Measured,
		Level: evidence.MaintainerLabMeasured,
		Subject: map[string]string{evidence.SubjectEndpoint: g.b.Endpoint, evidence.SubjectApplication: in.RequestDigest,
			evidence.SubjectWindow: window},
		Claim:      evidence.Claim{Quantity: Quantity, Verdict: &verdict, Value: &att, Unit: "fraction"},
		Engine:     evidence.Engine{Name: "vllm", Version: g.b.EngineVersion, Packages: []string{}},
		Provenance: evidence.Provenance{Producer: Producer, ProducerVersion: version.Version, Inputs: inputs},
		Display: map[string]any{"engine_iid": g.b.IID, "process_start_time_seconds": g.b.ProcessStart, "serving": stats,
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
