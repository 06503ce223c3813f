package check

import (
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/attest"
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
			{Name: GateProduce, Lines: []Line{ok("e0"), ok("e1")}},
			{Name: GateConsume, Lines: []Line{{Status: consume, Engine: "e0 -> e1"}, ok("e1 -> e0")}},
			{Name: GateSLO, Lines: []Line{ok("e0"), ok("e1")}},
		}}
	return rep, cfg
}

func TestEvidenceDeterministic(t *testing.T) {
	clock := ports.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	digests := func(start float64, consume Status) ([]EngineEvidence, []string) {
		rep, cfg := sampleReport(start, consume)
		ee, err := Evidence(rep, cfg, clock, "test")
		if err != nil {
			t.Fatal(err)
		}
		ds, err := Digests(ee)
		if err != nil {
			t.Fatal(err)
		}
		return ee, ds
	}
	ee1, d1 := digests(100, OK)
	_, d2 := digests(100, OK)
	if len(d1) != 4 || len(d2) != 4 {
		t.Fatalf("want a boot and a serving record per engine, got %d and %d", len(d1), len(d2))
	}
	for i := range d1 {
		if d1[i] != d2[i] {
			t.Fatalf("same inputs, different digests:\n%v\n%v", d1, d2)
		}
	}
	if ee1[0].State != StateServingVerified || ee1[1].State != StateServingVerified {
		t.Fatalf("states %q %q, want serving_verified", ee1[0].State, ee1[1].State)
	}
	// A restarted process of the same build: same execution, new records.
	ee3, d3 := digests(200, OK)
	if ee3[0].Execution != ee1[0].Execution {
		t.Fatal("the execution fingerprint moved with the process start")
	}
	if d3[0] == d1[0] && d3[1] == d1[1] {
		t.Fatal("records of a different process have the same digests")
	}
	// A failed pair stops both of its engines at boot_verified.
	ee4, _ := digests(100, Fail)
	if ee4[0].State != StateBootVerified || ee4[1].State != StateBootVerified {
		t.Fatalf("after a failed pair: states %q %q, want boot_verified", ee4[0].State, ee4[1].State)
	}
	if v := *ee4[0].Records[1].Claim.Verdict; v != "fail" {
		t.Fatalf("serving verdict %q, want fail", v)
	}
}
