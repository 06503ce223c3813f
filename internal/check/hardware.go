package check

import (
	"context"

	"github.com/narwhal-go/narwhal/internal/attest"
)

// FailureHardware is the failure_kind of a hardware gate FAIL line: the
// engine host's observed accelerator contradicts the fleet's hardware
// block.
const FailureHardware = "hardware_mismatch"

// hardware compares each verified attestation's observed accelerator with
// the fleet's hardware block (attest.CompareAccelerator). A mismatch fails
// and holds the engine out of the KV probes, as a contract failure does:
// a profile, an SLO and a memory plan made for one accelerator say nothing
// about another. An accelerator the sidecar could not observe (no
// nvidia-smi, no device report, a v1 sidecar) is a WARN: preflight cannot
// prove the shape, and refusing every fleet without NVML access would make
// the gate useless on them.
func (r *run) hardware(_ context.Context, g *Gate) {
	hw := r.cfg.Hardware
	switch {
	case hw == nil:
		g.add(Skip, "", "no hardware block declared: observed accelerators are not compared")
		return
	case r.cfg.EngineContract == nil:
		g.add(Skip, "", "no engine_contract: no attestation sidecar to observe the accelerator")
		return
	}
	for _, e := range r.liveEngines() {
		p, ok := r.attested[e.IID]
		if !ok {
			g.add(Skip, e.IID, "%s attestation not verified (see contract): accelerator not compared", e.IID)
			continue
		}
		if !p.Accelerator.Known() {
			g.add(Warn, e.IID, "%s accelerator %s: hardware.accelerator %q not verified; give narwhal-attest nvidia-smi or an engine with /v1/server/devices",
				e.IID, p.Accelerator, hw.Accelerator)
			continue
		}
		miss := attest.CompareAccelerator(p.Accelerator, *hw)
		for _, m := range miss {
			g.Lines = append(g.Lines, Line{Status: Fail, Engine: e.IID, Message: m.Message(e.IID), FailureKind: FailureHardware})
		}
		if len(miss) > 0 {
			r.incompatible[e.IID] = "hardware"
			continue
		}
		g.add(OK, e.IID, "%s runs %s as declared (hardware.accelerator, accelerators_per_engine %d, tensor_parallel %d)",
			e.IID, p.Accelerator, hw.AcceleratorsPerEngine, hw.TensorParallel)
	}
	r.skipUnreachable(g)
}
