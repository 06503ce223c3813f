// Package diagnose reads a vLLM engine log and names the failure in it: a
// family from a closed taxonomy, a fingerprint that is stable across runs
// and across vLLM's V0 and V1 wordings, and the typed facts the log states
// (ADR-006 §9; reference/evidence.md §2.11, §2.12).
//
// The log sanitization contract holds by construction: a Facts value has
// only numbers, closed enums and validated identifiers. No exported field
// can hold a substring of the log, so nothing a log says can be pasted into
// a command line by accident. Log text exists inside this package only
// while a line is being matched.
//
// The package is deterministic: identical input bytes and options give an
// identical Diagnosis (no clock, no ids, no map order in output).
package diagnose

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/evidence/memory"
)

// Facts are the typed values a diagnosis read from the log. Every field is
// nullable: nil means the log did not state it, or stated a value that was
// rejected (see Diagnosis.Rejected for why). Byte figures are exact
// integers converted from the logged decimal and unit.
type Facts struct {
	// Memory, in bytes.
	RequestedMemoryBytes  *int64 `json:"requested_memory_bytes"` // total × gpu_memory_utilization
	FreeMemoryBytes       *int64 `json:"free_memory_bytes"`      // free on the device at start-up (or at the OOM)
	TotalMemoryBytes      *int64 `json:"total_memory_bytes"`     // device total capacity as logged
	TriedToAllocateBytes  *int64 `json:"tried_to_allocate_bytes"`
	WeightsBytes          *int64 `json:"weights_bytes"`           // "Model loading took X GiB"
	KVAvailableBytes      *int64 `json:"kv_available_bytes"`      // may be negative (a negative KV budget)
	KVNeededBytes         *int64 `json:"kv_needed_bytes"`         // KV one max-length request needs
	CUDAGraphBytes        *int64 `json:"cuda_graph_bytes"`        // estimated or captured graph memory
	PyTorchAllocatedBytes *int64 `json:"pytorch_allocated_bytes"` // "X GiB is allocated by PyTorch"

	GPUMemoryUtilization *float64 `json:"gpu_memory_utilization"` // (0, 1]

	// Tokens and blocks.
	MaxModelLen          *int64 `json:"max_model_len"`           // the configured max seq len
	DerivedMaxModelLen   *int64 `json:"derived_max_model_len"`   // the model's own limit (max_position_embeddings…)
	KVCapacityTokens     *int64 `json:"kv_capacity_tokens"`      // tokens the KV cache holds
	EstimatedMaxModelLen *int64 `json:"estimated_max_model_len"` // vLLM's own estimate from the available memory
	NumGPUBlocks         *int64 `json:"num_gpu_blocks"`

	// Hardware.
	ComputeCapability         *ComputeCapability `json:"compute_capability"`          // the GPU's
	RequiredComputeCapability *ComputeCapability `json:"required_compute_capability"` // what the feature needs
	GPU                       *GPUKey            `json:"gpu"`                         // a key into memory's GPU table

	// Configuration.
	DType                *DType       `json:"dtype"`
	Quantization         *QuantMethod `json:"quantization"`
	TensorParallelSize   *int64       `json:"tensor_parallel_size"`
	PipelineParallelSize *int64       `json:"pipeline_parallel_size"`
	NumAttentionHeads    *int64       `json:"num_attention_heads"`
	NumKVHeads           *int64       `json:"num_kv_heads"`
	Port                 *int64       `json:"port"`
	HTTPStatus           *int64       `json:"http_status"` // 401 / 403 from the model hub
	ExitCode             *int64       `json:"exit_code"`   // a process exit code (137 = SIGKILL)
	Signal               *int64       `json:"signal"`      // the signal that ended a process (9 = SIGKILL)

	// Identity.
	ExceptionClass *ExceptionClass `json:"exception_class"`
	EngineVersion  *EngineVersion  `json:"engine_version"`
	EngineEra      *EngineEra      `json:"engine_era"`
	Architecture   *Architecture   `json:"architecture"`
	// ArchitectureRegistered: the "not supported for now" message's own list
	// of supported architectures names Architecture (vLLM registers it and
	// could not import it); nil when the log does not say.
	ArchitectureRegistered *bool `json:"architecture_registered"`
}

// ComputeCapability is a CUDA compute capability, e.g. 8.0.
type ComputeCapability struct {
	Major int `json:"major"` // 1..20
	Minor int `json:"minor"` // 0..9
}

// Valid reports whether c is in the range of real devices.
func (c ComputeCapability) Valid() bool {
	return c.Major >= 1 && c.Major <= 20 && c.Minor >= 0 && c.Minor <= 9
}

// Less orders capabilities.
func (c ComputeCapability) Less(d ComputeCapability) bool {
	return c.Major < d.Major || (c.Major == d.Major && c.Minor < d.Minor)
}

func (c ComputeCapability) String() string { return fmt.Sprintf("%d.%d", c.Major, c.Minor) }

// DType is a model data type, from a closed set.
type DType string

// Data types, in vLLM's canonical spelling.
const (
	DTypeFloat16  DType = "float16"
	DTypeBFloat16 DType = "bfloat16"
	DTypeFloat32  DType = "float32"
)

var dtypeAliases = map[string]DType{
	"float16": DTypeFloat16, "half": DTypeFloat16, "fp16": DTypeFloat16, "torch.float16": DTypeFloat16,
	"bfloat16": DTypeBFloat16, "bf16": DTypeBFloat16, "torch.bfloat16": DTypeBFloat16, "Bfloat16": DTypeBFloat16,
	"float32": DTypeFloat32, "float": DTypeFloat32, "fp32": DTypeFloat32, "torch.float32": DTypeFloat32,
}

// ParseDType maps a logged dtype spelling onto the closed set.
func ParseDType(s string) (DType, bool) { d, ok := dtypeAliases[s]; return d, ok }

// Valid reports whether d is a member of the closed set.
func (d DType) Valid() bool { return d == DTypeFloat16 || d == DTypeBFloat16 || d == DTypeFloat32 }

// UnmarshalJSON refuses values outside the closed set.
func (d *DType) UnmarshalJSON(b []byte) error { return unmarshalEnum(b, d, DType.Valid, "dtype") }

// QuantMethod is a vLLM quantization method name, from a closed set
// (vllm/model_executor/layers/quantization/__init__.py QUANTIZATION_METHODS).
type QuantMethod string

// quantMethods is the closed set.
var quantMethods = map[QuantMethod]bool{
	"aqlm": true, "awq": true, "awq_marlin": true, "deepspeedfp": true, "tpu_int8": true,
	"fp8": true, "ptpc_fp8": true, "fbgemm_fp8": true, "modelopt": true, "modelopt_fp4": true,
	"marlin": true, "bitblas": true, "gguf": true, "gptq_marlin_24": true, "gptq_marlin": true,
	"gptq_bitblas": true, "gptq": true, "compressed-tensors": true, "bitsandbytes": true,
	"qqq": true, "hqq": true, "experts_int8": true, "neuron_quant": true, "ipex": true,
	"quark": true, "moe_wna16": true, "torchao": true, "auto-round": true, "rtn": true,
	"inc": true, "mxfp4": true, "petit_nvfp4": true, "fp_quant": true, "squeezellm": true,
}

// ParseQuantMethod maps a logged method name onto the closed set.
func ParseQuantMethod(s string) (QuantMethod, bool) {
	q := QuantMethod(s)
	return q, quantMethods[q]
}

// Valid reports whether q is a member of the closed set.
func (q QuantMethod) Valid() bool { return quantMethods[q] }

// UnmarshalJSON refuses values outside the closed set.
func (q *QuantMethod) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(b, q, QuantMethod.Valid, "quantization method")
}

// EngineEra is the vLLM engine generation that printed the log.
type EngineEra string

// Engine eras.
const (
	EraV0 EngineEra = "v0"
	EraV1 EngineEra = "v1"
)

// Valid reports whether e is a member of the closed set.
func (e EngineEra) Valid() bool { return e == EraV0 || e == EraV1 }

// UnmarshalJSON refuses values outside the closed set.
func (e *EngineEra) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(b, e, EngineEra.Valid, "engine era")
}

// EngineVersion is a parsed vLLM version. Only numbers and a closed
// pre-release tag are kept; a local label (+g1234abc) is dropped.
type EngineVersion struct {
	Major int        `json:"major"`
	Minor int        `json:"minor"`
	Patch int        `json:"patch"`
	Micro int        `json:"micro"` // a fourth release component (0.10.1.1), 0 when absent
	Pre   PreRelease `json:"pre"`   // "" for a final release
	PreN  int        `json:"pre_n"`
	Post  int        `json:"post"` // -1 when absent
	Dev   int        `json:"dev"`  // -1 when absent
}

var versionRE = regexp.MustCompile(`^v?([0-9]{1,4})\.([0-9]{1,4})(?:\.([0-9]{1,4}))?(?:\.([0-9]{1,4}))?(?:(a|b|rc)([0-9]{1,4}))?(?:\.post([0-9]{1,6}))?(?:\.dev([0-9]{1,9}))?(?:\+[0-9a-zA-Z.]{1,64})?$`)

// ParseEngineVersion reads a vLLM version as PEP 440 spells it
// ("0.10.1.1", "0.11.0rc2", "0.9.2.dev364+gb432b7a28"); the local label is
// dropped.
func ParseEngineVersion(s string) (EngineVersion, bool) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return EngineVersion{}, false
	}
	num := func(x string, absent int) int {
		if x == "" {
			return absent
		}
		n, _ := strconv.Atoi(x) // the pattern admits digits only
		return n
	}
	return EngineVersion{Major: num(m[1], 0), Minor: num(m[2], 0), Patch: num(m[3], 0), Micro: num(m[4], 0),
		Pre: PreRelease(m[5]), PreN: num(m[6], 0), Post: num(m[7], -1), Dev: num(m[8], -1)}, true
}

// PreRelease is a PEP 440 pre-release tag.
type PreRelease string

// Pre-release tags.
const (
	PreNone  PreRelease = ""
	PreAlpha PreRelease = "a"
	PreBeta  PreRelease = "b"
	PreRC    PreRelease = "rc"
)

// Valid reports whether p is a member of the closed set.
func (p PreRelease) Valid() bool { return p == PreNone || p == PreAlpha || p == PreBeta || p == PreRC }

// UnmarshalJSON refuses values outside the closed set.
func (p *PreRelease) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(b, p, PreRelease.Valid, "pre-release tag")
}

// String prints the version in PEP 440 form.
func (v EngineVersion) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Micro > 0 {
		s += fmt.Sprintf(".%d", v.Micro)
	}
	if v.Pre != PreNone {
		s += fmt.Sprintf("%s%d", v.Pre, v.PreN)
	}
	if v.Post >= 0 {
		s += fmt.Sprintf(".post%d", v.Post)
	}
	if v.Dev >= 0 {
		s += fmt.Sprintf(".dev%d", v.Dev)
	}
	return s
}

// identifier is a validated name read from a log: letters, digits,
// underscores and dots only, bounded in length. It has no exported string
// field; its text is reachable only through String, and what String returns
// can contain no shell metacharacter, space, quote or control character.
type identifier struct {
	s string
}

// identMax bounds an identifier's length.
const identMax = 96

var (
	identRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	archRE   = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*(?:For[A-Z][A-Za-z0-9]*|Model|LMHeadModel)$`)
	moduleRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$`)
)

func newIdentifier(s string, re *regexp.Regexp) (identifier, bool) {
	if len(s) == 0 || len(s) > identMax || !re.MatchString(s) {
		return identifier{}, false
	}
	return identifier{s: s}, true
}

func (i identifier) String() string { return i.s }

// MarshalJSON writes the identifier as a JSON string.
func (i identifier) MarshalJSON() ([]byte, error) { return json.Marshal(i.s) }

// ExceptionClass is a Python exception class as printed
// ("torch.OutOfMemoryError", "ValueError"), validated as a dotted
// identifier. Aliases that name one class are folded to one spelling
// (torch.cuda.OutOfMemoryError → torch.OutOfMemoryError), so the
// fingerprint does not depend on the torch version.
type ExceptionClass struct{ identifier }

// exceptionAliases fold spellings of one class.
var exceptionAliases = map[string]string{
	"torch.cuda.OutOfMemoryError":                           "torch.OutOfMemoryError",
	"OutOfMemoryError":                                      "torch.OutOfMemoryError",
	"huggingface_hub.utils._errors.GatedRepoError":          "huggingface_hub.errors.GatedRepoError",
	"huggingface_hub.utils._errors.RepositoryNotFoundError": "huggingface_hub.errors.RepositoryNotFoundError",
	"vllm.v1.engine.exceptions.EngineDeadError":             "EngineDeadError",
	"vllm.v1.engine.exceptions.EngineGenerateError":         "EngineGenerateError",
}

// ParseExceptionClass validates a class name and folds aliases.
func ParseExceptionClass(s string) (ExceptionClass, bool) {
	if a, ok := exceptionAliases[s]; ok {
		s = a
	}
	id, ok := newIdentifier(s, identRE)
	return ExceptionClass{id}, ok
}

// UnmarshalJSON validates the class name.
func (e *ExceptionClass) UnmarshalJSON(b []byte) error {
	return unmarshalIdent(b, e, ParseExceptionClass, "exception class")
}

// Module is a dotted Python module inside the engine package
// ("vllm.v1.core.kv_cache_utils"), or the bare file stem a log header
// names ("kv_cache_utils") when no traceback gives the full path.
type Module struct{ identifier }

// ParseModule validates a dotted module name.
func ParseModule(s string) (Module, bool) {
	id, ok := newIdentifier(s, moduleRE)
	return Module{id}, ok
}

// UnmarshalJSON validates the module name.
func (m *Module) UnmarshalJSON(b []byte) error {
	return unmarshalIdent(b, m, ParseModule, "module")
}

// Architecture is a model architecture class name
// ("LlamaForCausalLM"), validated against the shape vLLM's registry uses.
// It is an identity fact (to look the model up), never a command value.
type Architecture struct{ identifier }

// ParseArchitecture validates an architecture name.
func ParseArchitecture(s string) (Architecture, bool) {
	id, ok := newIdentifier(s, archRE)
	return Architecture{id}, ok
}

// UnmarshalJSON validates the architecture name.
func (a *Architecture) UnmarshalJSON(b []byte) error {
	return unmarshalIdent(b, a, ParseArchitecture, "architecture")
}

// GPUKey is the Name of a row of memory's GPU table. A GPU name in a log
// becomes a key only when memory.LookupGPU knows it; the key is the table's
// spelling, never the log's.
type GPUKey struct{ identifier }

// UnmarshalJSON accepts only names in the GPU table.
func (g *GPUKey) UnmarshalJSON(b []byte) error {
	return unmarshalIdent(b, g, LookupGPUKey, "gpu")
}

func unmarshalEnum[T ~string](b []byte, dst *T, valid func(T) bool, what string) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !valid(T(s)) {
		return fmt.Errorf("%s %q: not in the closed set", what, s)
	}
	*dst = T(s)
	return nil
}

func unmarshalIdent[T any](b []byte, dst *T, parse func(string) (T, bool), what string) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	v, ok := parse(s)
	*dst = v
	if !ok {
		return fmt.Errorf("%s %q: not a valid identifier", what, s)
	}
	return nil
}

// LookupGPUKey finds a GPU name (any spelling memory.LookupGPU accepts) in
// the GPU table and returns the table's key for it.
func LookupGPUKey(name string) (GPUKey, bool) {
	if len(name) == 0 || len(name) > identMax {
		return GPUKey{}, false
	}
	g, err := memory.LookupGPU(name)
	if err != nil {
		return GPUKey{}, false
	}
	return GPUKey{identifier{s: g.Name}}, true
}

// GPU returns the table row the key names.
func (g GPUKey) GPU() (memory.GPU, error) { return memory.LookupGPU(g.s) }
