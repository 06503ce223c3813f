// Package support holds engine support states (ADR-006 Phase 0, reference
// §2.15): whether an engine release runs a model architecture natively,
// through its Transformers backend, through a plugin, recognizes it but
// failed to boot it, or does not support it — each on one GPU
// architecture and one CPU architecture, because a state on one
// architecture pair says nothing about another (INV-41).
//
// States derive from a pinned registry (data/registry.json) and from
// evidence records; the package is deterministic and reads no clock.
package support

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence"
)

// State is one engine support state.
type State string

const (
	NativeVLLM          State = "native_vllm"
	TransformersBackend State = "transformers_backend"
	Plugin              State = "plugin"
	RecognizedButFailed State = "recognized_but_failed"
	Unsupported         State = "unsupported"
)

// States lists the states, most to least capable.
var States = []State{NativeVLLM, TransformersBackend, Plugin, RecognizedButFailed, Unsupported}

// Valid reports whether s is one of States.
func (s State) Valid() bool { return slices.Contains(States, s) }

// Runs reports whether the engine is expected to load the architecture.
func (s State) Runs() bool { return s == NativeVLLM || s == TransformersBackend || s == Plugin }

// Key is one (architecture, engine, GPU arch, CPU arch) point.
type Key struct {
	Architecture  string `json:"architecture"`   // config.json architectures[0]
	EngineVersion string `json:"engine_version"` // vLLM release
	GPUArch       string `json:"gpu_arch"`       // "sm_90", "gfx942"; "" when not known
	CPUArch       string `json:"cpu_arch"`       // "x86_64", "aarch64"; "" when not known
}

func (k Key) String() string {
	return fmt.Sprintf("%s on %s/%s in vLLM %s", k.Architecture, orUnknown(k.GPUArch), orUnknown(k.CPUArch), k.EngineVersion)
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// Entry is a derived state with the reason and the evidence behind it.
type Entry struct {
	Key      Key      `json:"key"`
	State    State    `json:"state"`
	Reason   string   `json:"reason"`
	Plugin   string   `json:"plugin"`   // "name@version" for the plugin state
	Evidence []string `json:"evidence"` // record digests, or registry sources
}

// Registry is the pinned support facts of one vLLM version range.
type Registry struct {
	Version              string        `json:"version"`
	MinVersion           string        `json:"min_version"`
	MaxVersion           string        `json:"max_version"`
	Sources              []string      `json:"sources"`
	Native               []string      `json:"native"`
	TransformersFallback []Fallback    `json:"transformers_fallback"`
	Plugins              []PluginEntry `json:"plugins"`
	GPUArchs             []string      `json:"gpu_archs"`
	CPUArchs             []string      `json:"cpu_archs"`
}

// Fallback maps an architecture-name suffix to the Transformers backend
// class that would load it.
type Fallback struct {
	Suffix string `json:"suffix"`
	Class  string `json:"class"`
}

// PluginEntry is an out-of-tree plugin that registers an architecture.
type PluginEntry struct {
	Architecture string `json:"architecture"`
	Plugin       string `json:"plugin"` // "name@version"
}

//go:embed data/registry.json
var registryJSON []byte

type registryFile struct {
	Schema  string     `json:"schema"`
	Entries []Registry `json:"entries"`
}

// LoadRegistry finds the pinned facts covering version; ok is false when
// none do, and then no state can be derived.
func LoadRegistry(version string) (Registry, bool, error) {
	var f registryFile
	if err := json.Unmarshal(registryJSON, &f); err != nil {
		return Registry{}, false, fmt.Errorf("support registry: %w", err)
	}
	v, err := evidence.ParseVersion(strings.TrimPrefix(version, "v"))
	if err != nil {
		return Registry{}, false, fmt.Errorf("vLLM version %q: %w", version, err)
	}
	for _, e := range f.Entries {
		lo, _ := evidence.ParseVersion(e.MinVersion)
		hi, _ := evidence.ParseVersion(e.MaxVersion)
		if v.Compare(lo) >= 0 && v.Compare(hi) < 0 {
			return e, true, nil
		}
	}
	return Registry{}, false, nil
}

// GPUArchFromCC turns a CUDA compute capability ("9.0") into its arch
// name ("sm_90"); "" stays "".
func GPUArchFromCC(cc string) string {
	if strings.HasPrefix(cc, "gfx") { // ROCm tables name the arch already
		return cc
	}
	major, minor, ok := strings.Cut(cc, ".")
	if cc == "" || !ok {
		return ""
	}
	return "sm_" + major + minor
}

// CPUArchFromGOARCH names a Go GOARCH the way vLLM's wheels do.
func CPUArchFromGOARCH(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return goarch
}
