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

// Endpoint evidence states preflight can establish (reference/evidence.md
// §4.2). serving_verified is not among them: only serving evidence from
// the journal against an accepted request produces it (§4.4).
const (
	StateArtifactResolved      = "artifact_resolved"
	StateFormatDetected        = "format_detected"
	StateEngineConfigValidated = "engine_config_validated"
	StateBootVerified          = "boot_verified"
	StateServingVerified       = "serving_verified"
)

// Unbound prefixes the artifact subject of engines no plan was bound to:
// such boot records can never meet a prediction's artifact identity.
const Unbound = "unbound:model:"

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

// Binding names the artifact identity and hardware class the operator
// says the fleet's engines run, taken from a stored plan (its prediction
// record). Without one, boot records name the model only.
type Binding struct {
	Artifact      string
	HardwareClass string
	Plan          string // prediction record digest
}

// EngineEvidence is what one preflight run says about one engine.
type EngineEvidence struct {
	IID       string
	Execution string            // execution fingerprint
	State     string            // boot_verified when the boot was healthy, "" otherwise
	States    []string          // every endpoint state established
	Records   []evidence.Record // boot, endpoint states, then KV pairs it produced
}

// Evidence turns a report into records without a plan binding.
func Evidence(rep *Report, cfg *fleet.Config, clock ports.Clock, producerVersion string) ([]EngineEvidence, error) {
	return EvidenceBound(rep, cfg, Binding{}, clock, producerVersion)
}

// EvidenceBound turns a report into records: per engine a boot record
// (healthy or failed) on artifact + hardware class + execution, one
// record per endpoint state a gate decided, and one KV-transfer record
// per directed pair the consume gate probed, filed under the producer. It
// is a pure function of its inputs and the clock: same inputs, same digests.
func EvidenceBound(rep *Report, cfg *fleet.Config, b Binding, clock ports.Clock, pv string) ([]EngineEvidence, error) {
	if b.Artifact == "" {
		b.Artifact = Unbound + cfg.Model
	}
	if b.HardwareClass == "" {
		b.HardwareClass = declaredClass(cfg.Hardware)
	}
	bases := map[string]recordBase{}
	var out []EngineEvidence
	for _, e := range cfg.Engines {
		base, err := newBase(rep, cfg.Hardware, b, e.IID, clock, pv)
		if err != nil {
			return nil, fmt.Errorf("evidence for engine %s: %w", e.IID, err)
		}
		bases[e.IID] = base
		out = append(out, base.engineEvidence())
	}
	for i := range out {
		out[i].Records = append(out[i].Records, pairRecords(rep, bases, out[i].IID)...)
	}
	return out, nil
}

// declaredClass is the hardware class the fleet declares (no memory or
// capability: a plan binding gives the full class).
func declaredClass(h *fleet.Hardware) string {
	if h == nil {
		return "undeclared"
	}
	return fmt.Sprintf("%s/x%d", strings.ToLower(strings.ReplaceAll(h.Accelerator, " ", "-")), h.AcceleratorsPerEngine)
}

func newBase(rep *Report, hw *fleet.Hardware, b Binding, iid string, clock ports.Clock, pv string) (recordBase, error) {
	x := Execution{EngineVersion: rep.Live[iid].Version, Hardware: hw}
	var inputs []string
	if p := rep.Attested[iid]; p != nil {
		k := p.Contract
		x.Contract, x.EngineVersion = &k, p.Engine.Version
		inputs = append(inputs, p.AttestationDigest)
	}
	if canon.IsDigest(b.Plan) {
		inputs = append(inputs, b.Plan)
	}
	fp, err := x.Fingerprint()
	return recordBase{rep: rep, iid: iid, fp: fp, x: x, b: b, inputs: inputs, clock: clock, pv: pv}, err
}

func (base recordBase) engineEvidence() EngineEvidence {
	ee := EngineEvidence{IID: base.iid, Execution: base.fp}
	// A fleet-wide line (mixed versions) is about pairs, not about this
	// engine's boot: only the engine's own lines decide it.
	gates := base.rep.bootGates(base.iid)
	boot := base.rep.engineOutcome(base.iid, gates...)
	if boot == Skipped {
		return ee
	}
	verdict := evidence.VerdictHealthy
	if boot != Passed {
		verdict = evidence.VerdictFailed
	}
	ee.Records = append(ee.Records, base.record(evidence.KindBoot, evidence.ScopeBoot, "boot", verdict, base.subject(), gates...))
	if boot == Passed {
		ee.State = StateBootVerified
	}
	for _, st := range base.states(boot) {
		v := evidence.VerdictPass
		if st.o != Passed {
			v = evidence.VerdictFail
		} else {
			ee.States = append(ee.States, st.name)
		}
		ee.Records = append(ee.Records, base.record(evidence.KindEndpointState, evidence.ScopeConfig, "endpoint_state:"+st.name, v, base.subject(), st.gates...))
	}
	return ee
}

type stateOutcome struct {
	name  string
	o     Outcome
	gates []string
}

// states maps gates to endpoint states: reach + contract is boot; with an
// attested launch, the booted engine accepting its arguments is the
// engine's own config verdict; the model gate (the engine loaded and
// serves the artifact) is format detection; a bound, resolved artifact
// identity on an attested, serving engine is artifact resolution.
func (base recordBase) states(boot Outcome) []stateOutcome {
	gates := base.rep.bootGates(base.iid)
	out := []stateOutcome{{StateBootVerified, boot, gates}}
	if base.x.Contract != nil {
		out = append(out, stateOutcome{StateEngineConfigValidated, boot, gates})
	}
	model := base.rep.outcomeFor(base.iid, GateModel)
	if model == Skipped {
		return out
	}
	out = append(out, stateOutcome{StateFormatDetected, model, []string{GateModel}})
	if base.x.Contract != nil && canon.IsDigest(base.b.Artifact) {
		o := model
		if boot != Passed {
			o = Failed
		}
		out = append(out, stateOutcome{StateArtifactResolved, o, []string{GateContract, GateModel}})
	}
	return out
}

// pairRecords are the directed KV-transfer records whose producer is iid.
func pairRecords(rep *Report, bases map[string]recordBase, iid string) []evidence.Record {
	g := rep.Gate(GateConsume)
	if g == nil {
		return nil
	}
	var out []evidence.Record
	for _, l := range g.Lines {
		prod, cons, ok := strings.Cut(l.Engine, " -> ")
		if !ok || prod != iid || (l.Status != OK && l.Status != Fail) {
			continue
		}
		pb, cb := bases[prod], bases[cons]
		v := evidence.VerdictPass
		if l.Status == Fail {
			v = evidence.VerdictFail
		}
		subject := map[string]string{evidence.SubjectPair: l.Engine, "producer_endpoint": pb.fp, "consumer_endpoint": cb.fp}
		out = append(out, pb.record(evidence.KindCompatibility, evidence.ScopeKVTransfer, "kv_transfer", v, subject, GateProduce, GateConsume))
	}
	return out
}

type recordBase struct {
	rep    *Report
	iid    string
	fp     string
	x      Execution
	b      Binding
	inputs []string
	clock  ports.Clock
	pv     string
}

func (b recordBase) subject() map[string]string {
	return map[string]string{evidence.SubjectArtifact: b.b.Artifact, evidence.SubjectHardwareClass: b.b.HardwareClass, evidence.SubjectEndpoint: b.fp}
}

func (b recordBase) record(kind evidence.Kind, scope evidence.ClaimScope, quantity, verdict string, subject map[string]string, gates ...string) evidence.Record {
	var pkgs []string
	if b.x.Contract != nil && b.x.Contract.NIXLVersion != "" {
		pkgs = append(pkgs, "nixl@"+b.x.Contract.NIXLVersion)
	}
	display := map[string]any{"engine_iid": b.iid, "gates": b.rep.gateOutcomes(b.iid, gates...), "execution": b.x,
		"reason": "preflight", "production_mode": false}
	if id, ok := b.rep.Live[b.iid]; ok {
		display["process_start_time_seconds"] = id.ProcessStart
	}
	r := evidence.Record{Kind: kind, ClaimScope: scope, EpistemicStatus: evidence.Measured, Level: evidence.MaintainerLabMeasured,
		Subject:    subject,
		Claim:      evidence.Claim{Quantity: quantity, Verdict: &verdict},
		Engine:     evidence.Engine{Name: "vllm", Version: b.x.EngineVersion, Packages: append([]string{}, pkgs...)},
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
	return r.outcome(iid, true, gates)
}

// bootGates are the gates a boot rests on: reach and contract, and
// hardware when it compared iid's observed accelerator with the fleet's
// (an engine booted on another accelerator than declared has not booted
// the declared execution). A skipped or warned hardware gate — no
// hardware block, an unknown observation — proved nothing either way and
// leaves the boot as reach and contract decide it.
func (r *Report) bootGates(iid string) []string {
	gates := []string{GateReach, GateContract}
	if o := r.engineOutcome(iid, GateHardware); o == Passed || o == Failed {
		gates = append(gates, GateHardware)
	}
	return gates
}

// engineOutcome is outcomeFor without the fleet-wide lines.
func (r *Report) engineOutcome(iid string, gates ...string) Outcome {
	return r.outcome(iid, false, gates)
}

func (r *Report) outcome(iid string, fleetLines bool, gates []string) Outcome {
	result := Passed
	for _, name := range gates {
		g := r.Gate(name)
		if g == nil {
			return Skipped
		}
		switch lineOutcome(g, iid, fleetLines) {
		case Failed:
			return Failed
		case Skipped:
			result = Skipped
		}
	}
	return result
}

func lineOutcome(g *Gate, iid string, fleetLines bool) Outcome {
	o := Skipped
	for _, l := range g.Lines {
		about := l.Engine == iid || involves(l.Engine, iid)
		switch {
		case l.Status == Fail && (about || fleetLines && l.Engine == ""):
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

// BindingFromPlan takes the artifact identity and hardware class from a
// stored prediction record (narwhal plan's), so preflight's boot records
// meet the plan's on the same subject.
func BindingFromPlan(rec evidence.Record, digest string) (Binding, error) {
	if rec.Kind != evidence.KindPrediction {
		return Binding{}, fmt.Errorf("--plan %s is a %s record, not a prediction: pass the record digest narwhal plan printed", digest, rec.Kind)
	}
	a, hw := rec.Subject[evidence.SubjectArtifact], rec.Subject[evidence.SubjectHardwareClass]
	if a == "" || hw == "" {
		return Binding{}, fmt.Errorf("--plan %s names no artifact or hardware class", digest)
	}
	return Binding{Artifact: a, HardwareClass: hw, Plan: digest}, nil
}
