package avail

import (
	"context"
	"errors"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// gates are the readmission gates (runtime.md §3.5.3), run before the
// engine is placed again. old is the identity recorded before the drain;
// requireNewer demands a newer process (a planned restart). A failed
// identity gate (attestation, model, process identity with the fleet's
// build) ends validation before the generation probe and the KV
// transfer: an engine that has not proved what it is never moves KV.
func (s *Supervisor) gates(iid string, old *vllm.Identity, requireNewer bool) ([]lifecycle.Check, vllm.Identity) {
	ctx, cancel := context.WithTimeout(s.ctx, 4*s.probeTimeout()+units.Seconds(s.cfg.Engine.FirstTokenTimeoutS))
	defer cancel()
	g := &gateRun{}
	if !g.add("health", s.healthProbe(ctx, iid), "GET /health 200 and the credential accepted") {
		return g.checks, vllm.Identity{}
	}
	// The identity gates only read; all run, so every mismatch shows at
	// once. Nothing runs on the engine and no KV moves until they pass.
	digest, aerr := s.probes.Attestation(ctx, iid)
	var hw *HardwareMismatch
	if errors.As(aerr, &hw) {
		aerr = nil // attested: it is the hardware that differs
	}
	attested := g.add("attestation", aerr, "attested contract and process")
	if s.cfg.Hardware != nil {
		attested = g.add("hardware", asError(hw), "the accelerator the engine host reports is the fleet's hardware") && attested
	}
	modelOK := g.add("model", s.probes.Model(ctx, iid), s.cfg.Model)
	id, err := s.identityGate(ctx, iid, old, requireNewer)
	identified := g.add("process_identity", err, fmt.Sprintf("vLLM %s, process start %.3f", id.Version, id.ProcessStart))
	// The profile gate binds the attestation just verified rather than
	// fetching the sidecar a second time.
	profiled := identified && g.add("profile_generation", s.profileGenerationGate(ctx, iid, id, digest), "the loaded profile was measured on this process")
	if !attested || !modelOK || !profiled {
		return g.checks, id
	}
	g.add("generation", s.probes.Inference(ctx, iid), "a direct completion")
	g.add("kv_transfer", s.transferGate(ctx, iid), "")
	g.add("final_health", s.healthProbe(ctx, iid), "GET /health 200")
	return g.checks, id
}

// asError is h as an error, nil when h is (a nil *HardwareMismatch in an
// error would not be nil).
func asError(h *HardwareMismatch) error {
	if h == nil {
		return nil
	}
	return h
}

// gateRun collects the gates' outcomes in order.
type gateRun struct{ checks []lifecycle.Check }

// add records one gate; okDetail is its detail when it passed.
func (g *gateRun) add(name string, e error, okDetail string) bool {
	c := lifecycle.Check{Name: name, OK: e == nil, Detail: okDetail}
	if e != nil {
		c.Detail = e.Error()
	}
	g.checks = append(g.checks, c)
	return e == nil
}

// identityGate reads the process identity and holds it to the fleet's
// build and, for a planned restart, to a newer process than old.
func (s *Supervisor) identityGate(ctx context.Context, iid string, old *vllm.Identity, requireNewer bool) (vllm.Identity, error) {
	id, err := s.probes.Identity(ctx, iid)
	if err == nil {
		s.observeIdentity(iid, id) // a build hold lifts (or starts) on what validation saw
	}
	if b := s.lf.Build(); err == nil && b != "" && id.Version != b {
		err = fmt.Errorf("vLLM %s is not the fleet's build %s: restart the engine with vLLM %s", id.Version, b, b)
	}
	if err == nil && requireNewer && old != nil && !(id.ProcessStart > old.ProcessStart) {
		err = fmt.Errorf("process start %.3f is not newer than the drained process's %.3f: restart the engine before readmitting it", id.ProcessStart, old.ProcessStart)
	}
	return id, err
}

// transferGate moves KV from the candidate to a live peer (the first in
// iid order); with no live peer there is nothing to prove.
func (s *Supervisor) transferGate(ctx context.Context, iid string) error {
	for _, p := range s.order {
		if p != iid && s.Usable(p) {
			return s.probes.Transfer(ctx, iid, p)
		}
	}
	return nil
}
