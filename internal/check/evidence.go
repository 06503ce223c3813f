package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// Endpoint evidence states preflight can establish.
const (
	StateBootVerified    = "boot_verified"
	StateServingVerified = "serving_verified"
)

// Execution is what one engine replica executes, as far as attestation
// and the fleet's hardware block say: its fingerprint is the record
// subject. Process identity is left out on purpose, so a restarted
// process of the same build keeps its fingerprint.
type Execution struct {
	EngineVersion string                `json:"engine_version"`
	Contract      *fleet.EngineContract `json:"contract"` // the attested one; null when unverified
	Hardware      *fleet.Hardware       `json:"hardware"`
}

// Fingerprint is the canon digest of the execution.
func (x Execution) Fingerprint() (string, error) {
	_, d, err := canon.MarshalDigest(x)
	return d, err
}

// EngineEvidence is what one preflight run says about one engine.
type EngineEvidence struct {
	IID       string
	Execution string            // execution fingerprint
	State     string            // the highest state established, "" when none
	Records   []evidence.Record // boot, then serving (when evaluated)
}

// Evidence turns a report into records, one boot record per engine whose
// reach and contract gates ran and one serving record per engine whose KV
// and slo gates ran, each with the outcome as its verdict. It is a pure
// function of its inputs and the clock: same inputs, same digests.
func Evidence(rep *Report, cfg *fleet.Config, clock ports.Clock, producerVersion string) ([]EngineEvidence, error) {
	var out []EngineEvidence
	for _, e := range cfg.Engines {
		ee, err := engineEvidence(rep, cfg, e.IID, clock, producerVersion)
		if err != nil {
			return nil, fmt.Errorf("evidence for engine %s: %w", e.IID, err)
		}
		out = append(out, ee)
	}
	return out, nil
}

func engineEvidence(rep *Report, cfg *fleet.Config, iid string, clock ports.Clock, pv string) (EngineEvidence, error) {
	x := Execution{EngineVersion: rep.Live[iid].Version, Hardware: cfg.Hardware}
	var inputs []string
	if p := rep.Attested[iid]; p != nil {
		k := p.Contract
		x.Contract, x.EngineVersion = &k, p.Engine.Version
		inputs = append(inputs, p.AttestationDigest)
	}
	fp, err := x.Fingerprint()
	if err != nil {
		return EngineEvidence{}, err
	}
	ee := EngineEvidence{IID: iid, Execution: fp}
	base := recordBase{rep: rep, iid: iid, fp: fp, x: x, inputs: inputs, clock: clock, pv: pv}
	boot := rep.outcomeFor(iid, GateReach, GateContract)
	if boot != Skipped {
		ee.Records = append(ee.Records, base.record(evidence.KindBoot, evidence.ScopeBoot, StateBootVerified, boot, GateReach, GateContract))
		if boot == Passed {
			ee.State = StateBootVerified
		}
	}
	serving := rep.outcomeFor(iid, GateProduce, GateConsume, GateSLO)
	if serving != Skipped && boot != Skipped {
		ee.Records = append(ee.Records, base.record(evidence.KindCompatibility, evidence.ScopeKVTransfer, StateServingVerified, serving, GateProduce, GateConsume, GateSLO))
		if serving == Passed && boot == Passed {
			ee.State = StateServingVerified
		}
	}
	return ee, nil
}

type recordBase struct {
	rep    *Report
	iid    string
	fp     string
	x      Execution
	inputs []string
	clock  ports.Clock
	pv     string
}

func (b recordBase) record(kind evidence.Kind, scope evidence.ClaimScope, state string, o Outcome, gates ...string) evidence.Record {
	verdict := evidence.VerdictPass
	if o != Passed {
		verdict = "fail"
	}
	var pkgs []string
	if b.x.Contract != nil && b.x.Contract.NIXLVersion != "" {
		pkgs = append(pkgs, "nixl@"+b.x.Contract.NIXLVersion)
	}
	display := map[string]any{"engine_iid": b.iid, "state": state, "gates": b.rep.gateOutcomes(b.iid, gates...)}
	if id, ok := b.rep.Live[b.iid]; ok {
		display["process_start_time_seconds"] = id.ProcessStart
	}
	r := evidence.Record{Kind: kind, ClaimScope: scope, EpistemicStatus: evidence.Measured, Level: evidence.MaintainerLabMeasured,
		Subject:    map[string]string{evidence.SubjectEndpoint: b.fp},
		Claim:      evidence.Claim{Quantity: "endpoint_state:" + state, Verdict: &verdict},
		Engine:     evidence.Engine{Name: "vllm", Version: b.x.EngineVersion, Packages: pkgs},
		Provenance: evidence.Provenance{Producer: "narwhal-check", ProducerVersion: b.pv, Inputs: append([]string{}, b.inputs...)},
		Display:    display}
	return evidence.Stamp(r, b.clock)
}

// gateOutcomes maps each named gate to iid's outcome in it.
func (r *Report) gateOutcomes(iid string, gates ...string) map[string]any {
	out := map[string]any{}
	for _, g := range gates {
		out[g] = string(r.outcomeFor(iid, g))
	}
	return out
}

// outcomeFor is iid's outcome across gates: a failing line about iid (or
// the whole fleet) fails it; otherwise an ok line passes it; otherwise it
// was skipped. Every named gate must pass for a pass.
func (r *Report) outcomeFor(iid string, gates ...string) Outcome {
	result := Passed
	for _, name := range gates {
		g := r.Gate(name)
		if g == nil {
			return Skipped
		}
		switch lineOutcome(g, iid) {
		case Failed:
			return Failed
		case Skipped:
			result = Skipped
		}
	}
	return result
}

func lineOutcome(g *Gate, iid string) Outcome {
	o := Skipped
	for _, l := range g.Lines {
		about := l.Engine == iid || involves(l.Engine, iid)
		switch {
		case l.Status == Fail && (about || l.Engine == ""):
			return Failed
		case l.Status == OK && about:
			o = Passed
		}
	}
	return o
}

// involves reports whether a pair label "a -> b" names iid.
func involves(label, iid string) bool {
	a, b, ok := strings.Cut(label, " -> ")
	return ok && (a == iid || b == iid)
}

// Digests lists the record digests of ee, sorted.
func Digests(ee []EngineEvidence) ([]string, error) {
	var out []string
	for _, e := range ee {
		for _, r := range e.Records {
			d, err := r.Digest()
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out, nil
}
