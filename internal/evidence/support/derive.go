package support

import (
	"fmt"
	"slices"
	"strings"
)

// Observation is a support state some evidence record states for one key:
// an explicit mark, or a boot failure with its failure fingerprint.
type Observation struct {
	Key    Key
	State  State
	Plugin string
	Reason string // the record's own one-line reason, if any
	Record string // the record's digest
}

// Derive is the state of k from the registry and the observations
// (reference §2.15.3). Build targets are checked first, so an
// architecture pair the engine cannot run says so before anything else;
// observations only ever apply to their own exact key.
func Derive(k Key, reg Registry, obs []Observation) Entry {
	e := Entry{Key: k, Evidence: []string{}}
	if k.GPUArch != "" && !slices.Contains(reg.GPUArchs, k.GPUArch) {
		return e.set(Unsupported, fmt.Sprintf("vLLM %s builds target %s; %s is not among them", k.EngineVersion, strings.Join(reg.GPUArchs, " "), k.GPUArch), reg.Sources...)
	}
	if k.CPUArch != "" && !slices.Contains(reg.CPUArchs, k.CPUArch) {
		return e.set(Unsupported, fmt.Sprintf("vLLM %s GPU builds are for %s CPUs; %s is not one", k.EngineVersion, strings.Join(reg.CPUArchs, " "), k.CPUArch), reg.Sources...)
	}
	base := fromRegistry(k, reg)
	if k.GPUArch == "" || k.CPUArch == "" {
		base.Reason += "; the GPU or CPU architecture is not known, so the build-target check was skipped"
	}
	mine := matching(k, obs)
	if len(mine) == 0 {
		return base
	}
	worst := mine[0]
	for _, o := range mine[1:] {
		if rank(o.State) > rank(worst.State) {
			worst = o
		}
	}
	digests := make([]string, 0, len(mine))
	for _, o := range mine {
		if o.State == worst.State {
			digests = append(digests, o.Record)
		}
	}
	return observed(base, worst, digests)
}

// observed applies the most severe observation to the registry state: a
// failure of an architecture the registry recognizes is
// recognized_but_failed, of one it does not is unsupported.
func observed(base Entry, o Observation, digests []string) Entry {
	e := Entry{Key: base.Key, Evidence: []string{}}
	switch {
	case o.State == Unsupported:
		return e.set(Unsupported, withReason("marked unsupported on this architecture pair by evidence", o.Reason), digests...)
	case o.State == RecognizedButFailed && base.State.Runs():
		return e.set(RecognizedButFailed, withReason(fmt.Sprintf("the registry says %s, but a boot failed on this architecture pair", base.State), o.Reason), digests...)
	case o.State == RecognizedButFailed:
		return e.set(Unsupported, base.Reason+"; a boot failure on this pair agrees", digests...)
	case o.State == Plugin && !base.State.Runs():
		e = e.set(Plugin, "registered by the out-of-tree plugin "+o.Plugin, digests...)
		e.Plugin = o.Plugin
		return e
	}
	return base // a positive observation never overrides a registry fact
}

func fromRegistry(k Key, reg Registry) Entry {
	e := Entry{Key: k, Evidence: []string{}}
	if slices.Contains(reg.Native, k.Architecture) {
		return e.set(NativeVLLM, "in vLLM "+k.EngineVersion+"'s model registry (pinned facts "+reg.MinVersion+" to <"+reg.MaxVersion+")", reg.Sources...)
	}
	for _, p := range reg.Plugins {
		if p.Architecture == k.Architecture {
			e = e.set(Plugin, "registered by the out-of-tree plugin "+p.Plugin, reg.Sources...)
			e.Plugin = p.Plugin
			return e
		}
	}
	for _, f := range reg.TransformersFallback {
		if strings.HasSuffix(k.Architecture, f.Suffix) {
			return e.set(TransformersBackend, fmt.Sprintf("not in vLLM %s's registry; %s would load it if its Transformers class supports vLLM's attention interface (boot-verify it)", k.EngineVersion, f.Class), reg.Sources...)
		}
	}
	return e.set(Unsupported, fmt.Sprintf("not in vLLM %s's model registry and no Transformers fallback class loads a %q", k.EngineVersion, k.Architecture), reg.Sources...)
}

func (e Entry) set(s State, reason string, evidence ...string) Entry {
	e.State, e.Reason = s, reason
	e.Evidence = append(e.Evidence, evidence...)
	return e
}

// matching keeps the observations for exactly k: no state carries across
// GPU or CPU architectures, nor across engine versions.
func matching(k Key, obs []Observation) []Observation {
	var out []Observation
	for _, o := range obs {
		if o.Key == k {
			out = append(out, o)
		}
	}
	return out
}

func withReason(s, reason string) string {
	if reason == "" {
		return s
	}
	return s + ": " + reason
}

func rank(s State) int { return slices.Index(States, s) }
