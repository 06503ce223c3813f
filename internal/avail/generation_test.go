package avail

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// digestProbes count the sidecar reads the generation gate makes itself.
type digestProbes struct {
	fakeProbes
	digest string
	reads  *atomic.Int32
}

func (p digestProbes) AttestationDigest(context.Context, string, vllm.Identity) (string, error) {
	p.reads.Add(1)
	return p.digest, nil
}

// On a contracted fleet the profile gate binds the attestation digest the
// attestation gate just verified; only without one does it read the
// sidecar itself. The verdict is the same either way.
func TestProfileGenerationGateUsesTheVerifiedAttestation(t *testing.T) {
	id := vllm.Identity{Version: "0.9.0", ProcessStart: 1}
	att1, att0 := "1220"+strings.Repeat("a", 64), "1220"+strings.Repeat("b", 64) // multihash sha256 digests
	live, err := profile.Generation(id.Version, id.ProcessStart, att1)
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := profile.Generation(id.Version, id.ProcessStart, att0)
	for _, tc := range []struct {
		name      string
		row       string // the loaded row's generation
		attested  string // what the attestation gate verified
		wantReads int32
		wantOK    bool
	}{
		{"verified digest, matching row", live, att1, 0, true},
		{"verified digest, stale row", stale, att1, 0, false},
		{"no verified digest: the gate reads the sidecar", live, "", 1, true},
	} {
		reads := &atomic.Int32{}
		f := newFixture(t, 0, digestProbes{digest: att1, reads: reads})
		f.s.cfg.EngineContract = &fleet.EngineContract{}
		f.s.SetGenerations(map[string]string{"d0": tc.row})
		err := f.s.profileGenerationGate(context.Background(), "d0", id, tc.attested)
		if (err == nil) != tc.wantOK || reads.Load() != tc.wantReads {
			t.Errorf("%s: err %v, sidecar reads %d; want ok %v, %d reads", tc.name, err, reads.Load(), tc.wantOK, tc.wantReads)
		}
	}
}

// hardwareProbes attest a host whose accelerator contradicts the fleet.
type hardwareProbes struct{ fakeProbes }

func (hardwareProbes) Attestation(_ context.Context, iid string) (string, error) {
	return "sha256:" + strings.Repeat("ab", 32), &HardwareMismatch{IID: iid, Mismatches: []attest.HardwareMismatch{{Field: "hardware.accelerator",
		Declared: `"NVIDIA H200"`, Observed: `"NVIDIA H100 80GB HBM3"`, Fix: "set hardware.accelerator"}}}
}

// Readmission compares the attested accelerator with the fleet's hardware
// block, as preflight does: a contradiction fails a "hardware" check
// naming the field and both values, and nothing runs on the engine.
func TestReadmissionRefusesOtherHardware(t *testing.T) {
	f := newFixtureWith(t, hardwareProbes{}, func(cfg *fleet.Config) {
		cfg.Hardware = &fleet.Hardware{Accelerator: "NVIDIA H200", AcceleratorsPerEngine: 1, TensorParallel: 1}
	})
	checks, _ := f.s.gates("d0", nil, false)
	var hw *lifecycle.Check
	for i := range checks {
		if checks[i].Name == "hardware" {
			hw = &checks[i]
		}
		if checks[i].Name == "generation" {
			t.Fatalf("the engine was run although its hardware differs: %+v", checks)
		}
	}
	if hw == nil || hw.OK || !strings.Contains(hw.Detail, "hardware.accelerator is \"NVIDIA H200\"") || !strings.Contains(hw.Detail, "NVIDIA H100 80GB HBM3") {
		t.Fatalf("hardware check %+v in %+v", hw, checks)
	}
}
