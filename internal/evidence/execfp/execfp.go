// Package execfp is the execution fingerprint and the measurement boundary
// of ADR-006 (reference/evidence.md §2.9): a runtime measurement belongs
// only to the execution that produced it, and the fingerprint names that
// execution — artifact and quantization identity, normalized engine
// configuration, container digest, GPU SKU / memory / compute capability,
// selected attention / linear / MoE backends, PyTorch, CUDA-or-ROCm runtime
// and driver versions, graph mode and capture sizes, allocator-relevant
// environment, TP/PP/DP/EP topology with world size and rank, and the
// profiling workload shape.
//
// A part that is not known is left nil and listed in MissingFields: it is
// recorded as missing, never guessed, and a fingerprint with a missing
// part is incomplete. Only equal, complete fingerprints are an exact
// match (Match, Classify); anything else may inform a prediction, never
// count as a measurement of the current execution.
//
// The package is deterministic (INV-42): pure functions of their
// arguments, no clock, environment or map order in any output.
package execfp

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
)

// Schema of the fingerprint input record.
const (
	Schema        = "narwhal.execfp.input"
	SchemaVersion = 1
)

// Input is everything an execution fingerprint covers. Every part is
// identity except SchemaVersion and ReuseKeys. Build one, then call
// Normalize (Fingerprint does it for you).
type Input struct {
	Schema        string `json:"schema" ev:"id"`
	SchemaVersion int    `json:"schema_version" ev:"display"`

	Artifact         *string       `json:"artifact_identity" ev:"id"`     // ArtifactIdentity digest, "1220…"
	Quantization     *string       `json:"quantization_identity" ev:"id"` // QuantizationSpec fingerprint, "1220…"
	RuntimeTransform *string       `json:"runtime_transform" ev:"id"`     // RuntimeTransformSpec fingerprint, "1220…" (a spec of "none" has one too)
	EngineConfig     *EngineConfig `json:"engine_config" ev:"id"`         // normalized (engineconfig.go)
	EngineVersion    *string       `json:"engine_version" ev:"id"`        // PEP 440, e.g. "0.21.0"
	ContainerDigest  *string       `json:"container_digest" ev:"id"`      // "sha256:<64 hex>"; see NativeExecution
	GPU              GPU           `json:"gpu" ev:"id"`
	Backends         Backends      `json:"backends" ev:"id"`
	Stack            Stack         `json:"stack" ev:"id"`
	Graph            Graph         `json:"graph" ev:"id"`
	AllocatorEnv     *Env          `json:"allocator_env" ev:"id"` // allow-listed variables only (NormalizeEnv)
	Topology         Topology      `json:"topology" ev:"id"`
	Shape            WorkloadShape `json:"profiling_shape" ev:"id"`
	MissingFields    []string      `json:"missing_fields" ev:"id"` // computed by Normalize, sorted

	ReuseKeys map[string]string `json:"engine_reuse_keys" ev:"display"` // the engine's own cache keys (vLLM's startup-plan hash): the minimum reuse boundary, not identity
}

// NativeExecution is the ContainerDigest of an engine that runs outside a
// container image: known to be native, which is not the same as missing.
const NativeExecution = "native"

// GPU is the device one rank runs on.
type GPU struct {
	SKU               *string `json:"sku" ev:"id"`                // product name as the driver reports it
	TotalMemoryBytes  *int64  `json:"total_memory_bytes" ev:"id"` // as the driver reports it
	ComputeCapability *string `json:"compute_capability" ev:"id"` // "9.0", or "gfx942" on ROCm
	Count             *int    `json:"count" ev:"id"`              // devices the engine uses
}

// Backends are the kernels vLLM selected (from its startup log or the
// attestation), names as vLLM spells them.
type Backends struct {
	Attention *string `json:"attention" ev:"id"` // e.g. "FLASH_ATTN", "FLASHINFER"
	Linear    *string `json:"linear" ev:"id"`    // e.g. "MarlinLinearKernel"; "unquantized" for plain GEMM
	MoE       *string `json:"moe" ev:"id"`       // "none" for dense models
}

// Stack is the software under the engine.
type Stack struct {
	TorchVersion   *string `json:"torch_version" ev:"id"`
	RuntimeVersion *string `json:"runtime_version" ev:"id"` // CUDA or ROCm runtime
	DriverVersion  *string `json:"driver_version" ev:"id"`
}

// GraphMode is vLLM's CUDA-graph mode, lower-case.
type GraphMode string

// Graph modes (vLLM CUDAGraphMode; "none" is eager execution).
const (
	GraphNone             GraphMode = "none"
	GraphPiecewise        GraphMode = "piecewise"
	GraphFull             GraphMode = "full"
	GraphFullDecodeOnly   GraphMode = "full_decode_only"
	GraphFullAndPiecewise GraphMode = "full_and_piecewise"
)

var graphModes = map[GraphMode]bool{GraphNone: true, GraphPiecewise: true, GraphFull: true, GraphFullDecodeOnly: true, GraphFullAndPiecewise: true}

// Graph is the graph mode and the batch sizes captured.
type Graph struct {
	Mode         *GraphMode `json:"mode" ev:"id"`
	CaptureSizes *[]int     `json:"capture_sizes" ev:"id"` // sorted, unique; [] in mode none
}

// Topology is the parallel layout and this rank's place in it.
type Topology struct {
	TP        *int `json:"tp" ev:"id"`
	PP        *int `json:"pp" ev:"id"`
	DP        *int `json:"dp" ev:"id"`
	EP        *int `json:"ep" ev:"id"` // expert-parallel size; 1 without expert parallelism
	WorldSize *int `json:"world_size" ev:"id"`
	Rank      *int `json:"rank" ev:"id"`
}

// WorkloadShape is the shape of the profiling run.
type WorkloadShape struct {
	MaxNumBatchedTokens *int64 `json:"max_num_batched_tokens" ev:"id"`
	MaxNumSeqs          *int64 `json:"max_num_seqs" ev:"id"`
	MaxModelLen         *int64 `json:"max_model_len" ev:"id"`
}

// Env is a set of environment variables, name to value.
type Env map[string]string

var (
	reContainer = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	reCC        = regexp.MustCompile(`^(?:[0-9]+\.[0-9]+|gfx[0-9a-f]+)$`)
	reToken     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+:-]*$`) // versions and backend names
	reSKU       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._()/+-]*$`)
)

// Normalize checks in and returns its normal form: capture sizes sorted
// and de-duplicated ([] when the mode is none), the allocator environment
// reduced to the allow-list (NormalizeEnv), the engine configuration
// normalized, schema constants set, and MissingFields listing every part
// that is nil. Errors name the field and the fix.
func Normalize(in Input) (Input, error) {
	in.Schema, in.SchemaVersion = Schema, SchemaVersion
	if err := checkDigests(in); err != nil {
		return Input{}, err
	}
	if err := checkStrings(in); err != nil {
		return Input{}, err
	}
	if err := checkNumbers(in); err != nil {
		return Input{}, err
	}
	if err := normalizeGraph(&in.Graph); err != nil {
		return Input{}, err
	}
	if in.AllocatorEnv != nil {
		env := NormalizeEnv(*in.AllocatorEnv)
		in.AllocatorEnv = &env
	}
	if in.EngineConfig != nil {
		c, err := in.EngineConfig.normalized()
		if err != nil {
			return Input{}, err
		}
		in.EngineConfig = &c
	}
	in.MissingFields = missing(in)
	if in.ReuseKeys == nil {
		in.ReuseKeys = map[string]string{}
	}
	return in, nil
}

func checkDigests(in Input) error {
	for _, d := range []struct {
		name string
		v    *string
	}{{"artifact_identity", in.Artifact}, {"quantization_identity", in.Quantization}, {"runtime_transform", in.RuntimeTransform}} {
		if d.v != nil && !canon.IsDigest(*d.v) {
			return fmt.Errorf("execfp: %s %q is not a 1220… digest; pass the identity's digest, never a repository name", d.name, *d.v)
		}
	}
	if c := in.ContainerDigest; c != nil && *c != NativeExecution && !reContainer.MatchString(*c) {
		return fmt.Errorf("execfp: container_digest %q: want \"sha256:\" and 64 lower-case hex digits (the image digest, not a tag), or %q", *c, NativeExecution)
	}
	if v := in.EngineVersion; v != nil {
		if _, err := evidence.ParseVersion(*v); err != nil {
			return fmt.Errorf("execfp: engine_version: %w", err)
		}
	}
	return nil
}

func checkStrings(in Input) error {
	if s := in.GPU.SKU; s != nil && (!reSKU.MatchString(*s) || len(*s) > 128) {
		return fmt.Errorf("execfp: gpu.sku %q: want the driver's product name (letters, digits, spaces, ._()/+-)", *s)
	}
	if s := in.GPU.ComputeCapability; s != nil && !reCC.MatchString(*s) {
		return fmt.Errorf("execfp: gpu.compute_capability %q: want \"9.0\" or a ROCm target such as \"gfx942\"", *s)
	}
	for _, f := range []struct {
		name string
		v    *string
	}{
		{"backends.attention", in.Backends.Attention}, {"backends.linear", in.Backends.Linear}, {"backends.moe", in.Backends.MoE},
		{"stack.torch_version", in.Stack.TorchVersion}, {"stack.runtime_version", in.Stack.RuntimeVersion}, {"stack.driver_version", in.Stack.DriverVersion},
	} {
		if f.v != nil && (!reToken.MatchString(*f.v) || len(*f.v) > 128) {
			return fmt.Errorf("execfp: %s %q: want a name or version (letters, digits, ._+:-)", f.name, *f.v)
		}
	}
	return nil
}

func checkNumbers(in Input) error {
	if v := in.GPU.TotalMemoryBytes; v != nil && (*v <= 0 || *v > 1<<53-1) {
		return fmt.Errorf("execfp: gpu.total_memory_bytes %d: want a positive byte count", *v)
	}
	pos := []struct {
		name string
		v    *int
	}{{"gpu.count", in.GPU.Count}, {"topology.tp", in.Topology.TP}, {"topology.pp", in.Topology.PP}, {"topology.dp", in.Topology.DP}, {"topology.ep", in.Topology.EP}, {"topology.world_size", in.Topology.WorldSize}}
	for _, p := range pos {
		if p.v != nil && *p.v < 1 {
			return fmt.Errorf("execfp: %s %d: want 1 or more", p.name, *p.v)
		}
	}
	t := in.Topology
	if t.Rank != nil && (*t.Rank < 0 || (t.WorldSize != nil && *t.Rank >= *t.WorldSize)) {
		return fmt.Errorf("execfp: topology.rank %d: want 0 … world_size−1", *t.Rank)
	}
	for _, s := range []struct {
		name string
		v    *int64
	}{{"profiling_shape.max_num_batched_tokens", in.Shape.MaxNumBatchedTokens}, {"profiling_shape.max_num_seqs", in.Shape.MaxNumSeqs}, {"profiling_shape.max_model_len", in.Shape.MaxModelLen}} {
		if s.v != nil && (*s.v < 1 || *s.v > 1<<53-1) {
			return fmt.Errorf("execfp: %s %d: want 1 or more", s.name, *s.v)
		}
	}
	return nil
}

func normalizeGraph(g *Graph) error {
	if g.Mode != nil {
		m := GraphMode(strings.ToLower(string(*g.Mode)))
		if m == "eager" {
			m = GraphNone
		}
		if !graphModes[m] {
			return fmt.Errorf("execfp: graph.mode %q: want none, piecewise, full, full_decode_only or full_and_piecewise", *g.Mode)
		}
		g.Mode = &m
		if m == GraphNone {
			empty := []int{}
			g.CaptureSizes = &empty // nothing is captured: known, not missing
			return nil
		}
	}
	if g.CaptureSizes == nil {
		return nil
	}
	sizes := append([]int(nil), *g.CaptureSizes...)
	sort.Ints(sizes)
	out := []int{}
	for i, s := range sizes {
		if s < 1 {
			return fmt.Errorf("execfp: graph.capture_sizes has %d: capture sizes are positive batch sizes", s)
		}
		if i == 0 || s != sizes[i-1] {
			out = append(out, s)
		}
	}
	g.CaptureSizes = &out
	return nil
}

// allocatorVars are the non-VLLM variables that change memory behaviour
// (reference/evidence.md §2.9.3).
var allocatorVars = map[string]bool{
	"PYTORCH_CUDA_ALLOC_CONF": true, "PYTORCH_HIP_ALLOC_CONF": true,
	"NCCL_CUMEM_ENABLE": true, "NCCL_CUMEM_HOST_ENABLE": true,
}

// secretWords mark a variable that may hold a credential; such a variable
// never enters a fingerprint, even when its prefix is VLLM_.
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH"}

// CUDAVisibleDevicesCount is the key NormalizeEnv records
// CUDA_VISIBLE_DEVICES under: the number of devices, not their ids.
const CUDAVisibleDevicesCount = "CUDA_VISIBLE_DEVICES_COUNT"

// NormalizeEnv keeps the allocator-relevant environment: the allow-listed
// allocator and NCCL variables, every VLLM_* variable (vLLM's compile-cache
// hash covers them; the caller may pass the exact set its version hashes),
// and CUDA_VISIBLE_DEVICES as a device count. Anything else is dropped, and
// so is any variable whose name suggests a credential (VLLM_API_KEY, …).
// Names must be ASCII.
func NormalizeEnv(env Env) Env {
	out := Env{}
	for k, v := range env {
		switch {
		case !isASCIIName(k) || isSecretName(k):
		case k == "CUDA_VISIBLE_DEVICES":
			out[CUDAVisibleDevicesCount] = strconv.Itoa(countDevices(v))
		case allocatorVars[k] || strings.HasPrefix(k, "VLLM_"):
			out[k] = v
		}
	}
	return out
}

func isASCIIName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func isSecretName(k string) bool {
	u := strings.ToUpper(k)
	for _, w := range secretWords {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

func countDevices(v string) int {
	n := 0
	for _, p := range strings.Split(v, ",") {
		if strings.TrimSpace(p) != "" {
			n++
		}
	}
	return n
}

// missing lists the nil parts of a normalized input, sorted.
func missing(in Input) []string {
	var out []string
	add := func(name string, isNil bool) {
		if isNil {
			out = append(out, name)
		}
	}
	add("artifact_identity", in.Artifact == nil)
	add("quantization_identity", in.Quantization == nil)
	add("runtime_transform", in.RuntimeTransform == nil)
	add("engine_config", in.EngineConfig == nil)
	add("engine_version", in.EngineVersion == nil)
	add("container_digest", in.ContainerDigest == nil)
	add("gpu.sku", in.GPU.SKU == nil)
	add("gpu.total_memory_bytes", in.GPU.TotalMemoryBytes == nil)
	add("gpu.compute_capability", in.GPU.ComputeCapability == nil)
	add("gpu.count", in.GPU.Count == nil)
	add("backends.attention", in.Backends.Attention == nil)
	add("backends.linear", in.Backends.Linear == nil)
	add("backends.moe", in.Backends.MoE == nil)
	add("stack.torch_version", in.Stack.TorchVersion == nil)
	add("stack.runtime_version", in.Stack.RuntimeVersion == nil)
	add("stack.driver_version", in.Stack.DriverVersion == nil)
	add("graph.mode", in.Graph.Mode == nil)
	add("graph.capture_sizes", in.Graph.CaptureSizes == nil)
	add("allocator_env", in.AllocatorEnv == nil)
	add("topology.tp", in.Topology.TP == nil)
	add("topology.pp", in.Topology.PP == nil)
	add("topology.dp", in.Topology.DP == nil)
	add("topology.ep", in.Topology.EP == nil)
	add("topology.world_size", in.Topology.WorldSize == nil)
	add("topology.rank", in.Topology.Rank == nil)
	add("profiling_shape.max_num_batched_tokens", in.Shape.MaxNumBatchedTokens == nil)
	add("profiling_shape.max_num_seqs", in.Shape.MaxNumSeqs == nil)
	add("profiling_shape.max_model_len", in.Shape.MaxModelLen == nil)
	if in.EngineConfig != nil {
		out = append(out, in.EngineConfig.missing()...)
	}
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// Fingerprint normalizes in and returns the digest of its identity
// projection ("1220…") with the normalized input.
func Fingerprint(in Input) (string, Input, error) {
	n, err := Normalize(in)
	if err != nil {
		return "", Input{}, err
	}
	_, d, err := canon.MarshalDigest(evidence.IdentityProjection(n))
	if err != nil {
		return "", Input{}, fmt.Errorf("execfp: %w", err)
	}
	return d, n, nil
}

// Complete reports whether a normalized input has no missing part.
func Complete(in Input) bool { return len(in.MissingFields) == 0 }

// Encode returns the canonical bytes and digest of the normalized input
// (the whole record, ReuseKeys included).
func Encode(in Input) ([]byte, string, error) {
	n, err := Normalize(in)
	if err != nil {
		return nil, "", err
	}
	return canon.MarshalDigest(n)
}
