package main

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/diagnose"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/support"
	"github.com/narwhal-go/narwhal/internal/planner"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// diagnoseSupportKey is the support point a diagnosis is about: the
// architecture and GPU the log names, else the model directory and --gpu.
func diagnoseSupportKey(f diagnoseFlags, in diagnoseInputs, d diagnose.Diagnosis, model *memory.PlanInput) support.Key {
	k := support.Key{CPUArch: f.cpuArch, EngineVersion: f.vllmVersion}
	if a := d.Facts.Architecture; a != nil {
		k.Architecture = a.String()
	} else if model != nil {
		if af, err := memory.ParseArch(model.Config); err == nil {
			k.Architecture = af.Architecture
		}
	}
	if cc := d.Facts.ComputeCapability; cc != nil {
		k.GPUArch = support.GPUArchFromCC(cc.String())
	} else if in.hw != nil {
		k.GPUArch = support.GPUArchFromCC(in.hw.ComputeCapability)
	}
	if v := d.Facts.EngineVersion; v != nil {
		k.EngineVersion = v.String()
	} else if k.EngineVersion == "" {
		k.EngineVersion = planner.DefaultVLLMVersion
	}
	return k
}

// diagnoseSupport derives the support state and, when the log shows vLLM
// refusing the architecture, records that on this exact pair (with the
// failure record as its evidence) so later plans say so too.
func diagnoseSupport(st *store.Store, f diagnoseFlags, in diagnoseInputs, run diagnoseRun, model *memory.PlanInput, clock ports.Clock) (*support.Entry, error) {
	k := diagnoseSupportKey(f, in, run.diag, model)
	if k.Architecture == "" {
		return nil, nil
	}
	e, ok, err := support.Lookup(st, k)
	if err != nil || !ok {
		return nil, nil // no pinned registry for the log's version: nothing to say
	}
	if run.diag.Family != diagnose.FamilyUnsupportedArch || run.failureDigest == "" || k.GPUArch == "" || k.CPUArch == "" {
		return &e, nil
	}
	// Recognized means registered (natively or by a plugin); a refused
	// Transformers fallback is evidence the fallback does not load it.
	state := support.Unsupported
	if e.State == support.NativeVLLM || e.State == support.Plugin {
		state = support.RecognizedButFailed
	}
	r, err := support.NewRecord(support.Mark{Key: k, State: state, Inputs: []string{run.failureDigest},
		Reason: "vLLM refused the architecture at start-up (narwhal diagnose)", Level: evidence.MaintainerLabMeasured}, clock)
	if err == nil {
		_, err = st.PutRecord(r)
	}
	if err != nil {
		return nil, fmt.Errorf("support record: %w", err)
	}
	e, _, err = support.Lookup(st, k)
	return &e, err
}
