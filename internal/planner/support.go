package planner

import (
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/support"
)

// SupportKey is the engine-support point a plan is about: its
// architecture on its GPU's architecture and cpuArch, at the planned vLLM.
func (r Result) SupportKey(cpuArch string) support.Key {
	return support.Key{
		Architecture: r.Prediction.Architecture, EngineVersion: r.FactsVersion,
		GPUArch: support.GPUArchFromCC(r.GPU.ComputeCapability), CPUArch: cpuArch,
	}
}

// Support derives the plan's engine support state from the pinned
// registry and the store's support records; nil when no registry covers
// the planned version.
func Support(st *store.Store, r Result, cpuArch string) (*support.Entry, error) {
	e, ok, err := support.Lookup(st, r.SupportKey(cpuArch))
	if err != nil || !ok {
		return nil, err
	}
	return &e, nil
}
