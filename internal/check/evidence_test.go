package check

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func sampleReport(start float64, consume Status) (*Report, *fleet.Config) {
	k := fleet.DefaultContract()
	k.VLLMVersion, k.NIXLVersion = "0.21.0", "0.6.1"
	cfg := &fleet.Config{Engines: []fleet.Engine{{IID: "e0"}, {IID: "e1"}},
		Hardware: &fleet.Hardware{Accelerator: "H100", AcceleratorsPerEngine: 1, TensorParallel: 1}}
	p := &attest.Payload{Contract: k, Engine: vllm.Identity{Version: "0.21.0", ProcessStart: start},
		AttestationDigest: "1220" + "ab" + "0000000000000000000000000000000000000000000000000000000000000000"[:62]}
	ok := func(e string) Line { return Line{Status: OK, Engine: e, Message: e} }
	rep := &Report{Attested: map[string]*attest.Payload{"e0": p, "e1": p},
		Live: map[string]vllm.Identity{"e0": p.Engine, "e1": p.Engine},
		Gates: []Gate{
			{Name: GateReach, Lines: []Line{ok("e0"), ok("e1")}},
			{Name: GateContract, Lines: []Line{ok("e0"), ok("e1")}},
			{Name: GateModel, Lines: []Line{ok("e0"), ok("e1")}},
			{Name: GateProduce, Lines: []Line{ok("e0"), ok("e1")}},
			{Name: GateConsume, Lines: []Line{{Status: consume, Engine: "e0 -> e1"}, ok("e1 -> e0")}},
			{Name: GateSLO, Lines: []Line{ok("e0"), ok("e1")}},
		}}
	return rep, cfg
}

func evidenceOf(t *testing.T, start float64, consume Status, b Binding) ([]EngineEvidence, []string) {
	t.Helper()
	clock := ports.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rep, cfg := sampleReport(start, consume)
	ee, err := EvidenceBound(rep, cfg, b, clock, "test")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := Digests(ee)
	if err != nil {
		t.Fatal(err)
	}
	return ee, ds
}

func TestEvidenceDeterministic(t *testing.T) {
	ee1, d1 := evidenceOf(t, 100, OK, Binding{})
	_, d2 := evidenceOf(t, 100, OK, Binding{})
	if len(d1) == 0 || !slices.Equal(d1, d2) {
		t.Fatalf("same inputs, different digests:\n%v\n%v", d1, d2)
	}
	// A restarted process of the same build: same execution, new records.
	ee3, d3 := evidenceOf(t, 200, OK, Binding{})
	if ee3[0].Execution != ee1[0].Execution {
		t.Fatal("the execution fingerprint moved with the process start")
	}
	if slices.Equal(d3, d1) {
		t.Fatal("records of a different process have the same digests")
	}
}

// Boot records count for the tier rules: claim scope boot, verdict
// healthy, subject artifact + hardware class + execution fingerprint.
func TestBootRecordCountsForTiers(t *testing.T) {
	art := "1220" + strings.Repeat("ab", 32)
	ee, _ := evidenceOf(t, 100, OK, Binding{Artifact: art, HardwareClass: "h100/81559mib/cc9.0/x1"})
	boot := ee[0].Records[0]
	if boot.Kind != evidence.KindBoot || boot.ClaimScope != evidence.ScopeBoot || *boot.Claim.Verdict != evidence.VerdictHealthy {
		t.Fatalf("boot record %s/%s verdict %s, want boot/boot healthy", boot.Kind, boot.ClaimScope, *boot.Claim.Verdict)
	}
	want := map[string]string{evidence.SubjectArtifact: art, evidence.SubjectHardwareClass: "h100/81559mib/cc9.0/x1", evidence.SubjectEndpoint: ee[0].Execution}
	if !maps.Equal(boot.Subject, want) {
		t.Fatalf("boot subject %v, want %v", boot.Subject, want)
	}
	wantStates := []string{StateBootVerified, StateEngineConfigValidated, StateArtifactResolved}
	for _, s := range wantStates {
		if !slices.Contains(ee[0].States, s) {
			t.Errorf("states %v lack %s", ee[0].States, s)
		}
	}
	if slices.Contains(ee[0].States, StateServingVerified) {
		t.Error("preflight claimed serving_verified: only serving evidence from the journal does")
	}
}

// One directed KV-transfer record per probed pair, filed under its
// producer, with the pair's verdict.
func TestPairRecords(t *testing.T) {
	ee, _ := evidenceOf(t, 100, Fail, Binding{})
	var pairs []string
	for _, e := range ee {
		for _, r := range e.Records {
			if r.ClaimScope == evidence.ScopeKVTransfer {
				pairs = append(pairs, r.Subject[evidence.SubjectPair]+"="+*r.Claim.Verdict)
			}
		}
	}
	slices.Sort(pairs)
	if want := []string{"e0 -> e1=fail", "e1 -> e0=pass"}; !slices.Equal(pairs, want) {
		t.Fatalf("pair records %v, want %v", pairs, want)
	}
	if ee[0].State != StateBootVerified {
		t.Fatalf("a failed pair changed the boot state: %q", ee[0].State)
	}
}

// Without a plan binding the artifact is the model name, marked unbound,
// and no artifact_resolved state is claimed.
func TestUnboundEvidenceNamesModelOnly(t *testing.T) {
	ee, _ := evidenceOf(t, 100, OK, Binding{})
	if a := ee[0].Records[0].Subject[evidence.SubjectArtifact]; !strings.HasPrefix(a, Unbound) {
		t.Fatalf("artifact subject %q, want %s…", a, Unbound)
	}
	if slices.Contains(ee[0].States, StateArtifactResolved) {
		t.Fatal("artifact_resolved without a resolved artifact identity")
	}
}

// A hardware gate that compared an engine decides its boot with reach and
// contract: an engine on another accelerator than declared has not booted
// the declared execution. A warned (unknown) or absent comparison leaves
// the boot record as it was.
func TestHardwareGateInBoot(t *testing.T) {
	tests := []struct {
		name  string
		line  *Line
		state string
		gates []string
	}{
		{name: "no hardware gate", state: StateBootVerified, gates: []string{GateContract, GateReach}},
		{name: "unknown accelerator", line: &Line{Status: Warn, Engine: "e0"}, state: StateBootVerified, gates: []string{GateContract, GateReach}},
		{name: "agrees", line: &Line{Status: OK, Engine: "e0"}, state: StateBootVerified, gates: []string{GateContract, GateHardware, GateReach}},
		{name: "mismatch", line: &Line{Status: Fail, Engine: "e0", FailureKind: FailureHardware}, state: "", gates: []string{GateContract, GateHardware, GateReach}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, cfg := sampleReport(100, OK)
			if tc.line != nil {
				rep.Gates = append(rep.Gates, Gate{Name: GateHardware, Lines: []Line{*tc.line}})
			}
			ee, err := EvidenceBound(rep, cfg, Binding{}, ports.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)), "test")
			if err != nil {
				t.Fatal(err)
			}
			boot := ee[0].Records[0]
			gates := slices.Sorted(maps.Keys(boot.Display["gates"].(map[string]any)))
			if ee[0].State != tc.state || !slices.Equal(gates, tc.gates) {
				t.Fatalf("state %q gates %v, want %q %v", ee[0].State, gates, tc.state, tc.gates)
			}
			if want := map[bool]string{true: evidence.VerdictHealthy, false: evidence.VerdictFailed}[tc.state != ""]; *boot.Claim.Verdict != want {
				t.Fatalf("boot verdict %s, want %s", *boot.Claim.Verdict, want)
			}
		})
	}
}
