package memory

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
)

// EngineFacts are the pinned memory facts of one vLLM version range
// (reference/evidence.md §2.8.3, §3.5): the startup accounting formula,
// launch defaults, KV sizing rules, weight-loading facts and the
// per-tensor sharding rules of each model family. They are data
// (data/engine_facts.json), each fact beside the vLLM source it was read
// from; the Prediction records the digest of the entry used.
type EngineFacts struct {
	Version     string      `json:"version"`     // the range label, e.g. "0.10"
	MinVersion  string      `json:"min_version"` // inclusive, e.g. "0.10.0"
	MaxVersion  string      `json:"max_version"` // exclusive, e.g. "0.12.0"
	Description string      `json:"description"`
	Accounting  Accounting  `json:"accounting"`
	Defaults    Defaults    `json:"defaults"`
	KV          KVFacts     `json:"kv"`
	Weights     WeightFacts `json:"weights"`
	Params      []ParamRule `json:"params"`
	RuleSets    []RuleSet   `json:"rule_sets"`
	// Uncertain lists the facts of this entry that are recorded from a
	// nearby version or inferred, not read at a tag of this range.
	Uncertain []string `json:"uncertain"`
	// Fallback is set by LoadFacts when the version asked for lies outside
	// every pinned range and this entry, the nearest, stands in for it. It
	// is not part of the entry (nor of its digest).
	Fallback *FactsFallback `json:"-"`
}

// FactsFallback says which version the nearest facts stand in for and how
// many minor releases lie between them.
type FactsFallback struct {
	Requested string // the version asked for, normalised ("0.40.0")
	Distance  int    // minor releases from the nearest pinned range (≥ 1)
}

// Accounting is how the version turns total memory into a KV budget
// (§3.5.2).
type Accounting struct {
	// Formula: "requested_minus_non_kv": available = requested −
	// (weights + torch peak increase + non-torch increase) − the applied
	// CUDA-graph estimate. The only formula implemented; any other value
	// makes the prediction unknown.
	Formula string `json:"formula"`
	// RequestedRounding: "ceil" (requested = ceil(total × util)) or
	// "float" (the product kept as a float; vLLM then floors at the block
	// division).
	RequestedRounding string `json:"requested_rounding"`
	// SubtractsCUDAGraphEstimate: the version subtracts a profiled
	// CUDA-graph estimate from the KV budget by default
	// (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).
	SubtractsCUDAGraphEstimate bool `json:"subtracts_cudagraph_estimate"`
	// MinAcrossWorkers: every worker gets the smallest block count.
	MinAcrossWorkers bool   `json:"min_across_workers"`
	Source           string `json:"source"`
}

// Defaults are the version's launch defaults the plan fills in.
type Defaults struct {
	BlockSize            int64   `json:"block_size"`
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	// MLABlockSize is the block size MLA models get on GPUs of at least
	// MLABlockSizeMinCC (FlashMLA); 0 = no override.
	MLABlockSize      int64  `json:"mla_block_size"`
	MLABlockSizeMinCC string `json:"mla_block_size_min_cc"`
	// Batch are the max_num_batched_tokens / max_num_seqs defaults of
	// `vllm serve`, first matching rule wins.
	Batch []BatchDefault `json:"batch"`
	// CaptureSizes is the default CUDA-graph capture list.
	CaptureSizes []int64 `json:"capture_sizes"`
	Source       string  `json:"source"`
}

// BatchDefault is one row of vLLM's hardware-dependent batch defaults. A
// row matches a GPU whose total memory is at least MinMemoryBytes, whose
// lower-cased name contains one of NameContainsAny (when given) and none
// of NameExcludes.
type BatchDefault struct {
	MinMemoryBytes      int64    `json:"min_memory_bytes"`
	NameContainsAny     []string `json:"name_contains_any"`
	NameExcludes        []string `json:"name_excludes"`
	MaxNumBatchedTokens int64    `json:"max_num_batched_tokens"`
	MaxNumSeqs          int64    `json:"max_num_seqs"`
}

// KVFacts are the KV-cache sizing rules of the version.
type KVFacts struct {
	// HybridAllocator: sliding-window layers get their own KV cache groups
	// sized by the window (the hybrid KV cache manager) rather than being
	// treated as full attention.
	HybridAllocator bool `json:"hybrid_allocator"`
	// DTypeBytes maps kv_cache_dtype values other than "auto" to bytes per
	// element. A value not listed is not modelled (unknown).
	DTypeBytes map[string]int64 `json:"dtype_bytes"`
	Source     string           `json:"source"`
}

// WeightFacts are how the version turns checkpoint tensors into resident
// bytes beyond the per-tensor split.
type WeightFacts struct {
	// VocabPadding: vocabulary-parallel embeddings pad the row count to a
	// multiple of this, then divide by TP (which must divide the result).
	VocabPadding int64 `json:"vocab_padding"`
	// FloatAsModelDType: unquantized float tensors are allocated in the
	// model dtype whatever dtype the checkpoint stores.
	FloatAsModelDType bool `json:"float_as_model_dtype"`
	// Float32Auto is the dtype "auto" resolves to for a float32 config:
	// "float16", "bfloat16" or "platform" (bfloat16 where the GPU has it).
	Float32Auto string `json:"float32_auto"`
	// BFloat16Families resolve a float32 config to bfloat16 (Gemma).
	BFloat16Families []string `json:"bfloat16_families"`
	// ScalesAsFloat32 lists the quantization methods (quant_method, or
	// "compressed-tensors:<format>") whose weight/input scales vLLM
	// allocates in float32.
	ScalesAsFloat32 []string `json:"scales_as_float32"`
	// RopeCache: the rotary embedding keeps a cos/sin cache of
	// max_position × rotary_dim elements in the model dtype.
	RopeCache bool `json:"rope_cache"`
	// MLAAbsorbedCopy: MLA backends keep W_UK/W_UV derived from kv_b_proj
	// beside it (one more kv_b_proj in the model dtype per layer).
	MLAAbsorbedCopy bool `json:"mla_absorbed_copy"`
	// MXFP4IntermediatePad: MXFP4 MoE pads the per-partition intermediate
	// size to a multiple of this (backend dependent).
	MXFP4IntermediatePad int64 `json:"mxfp4_intermediate_pad"`
	// SupportedQuant are the quant_method values whose checkpoint layout
	// the calculator loads at header bytes; any other method makes the
	// weight component unknown.
	SupportedQuant []string `json:"supported_quant"`
	Source         string   `json:"source"`
}

// ParamRule says which dimensions of a parameter are the linear's output
// and input dimensions (−1 = none), by the tensor name's last segment.
// Aux marks quantization auxiliaries (kept at their stored dtype).
type ParamRule struct {
	Suffix string `json:"suffix"`
	OutDim int    `json:"out_dim"`
	InDim  int    `json:"in_dim"`
	Aux    bool   `json:"aux"`
}

// RuleSet is the sharding rules of one model family.
type RuleSet struct {
	Family string `json:"family"`
	// ExtraLayers: "skip" when tensors of layers past num_hidden_layers
	// (multi-token-prediction layers) are not loaded; "" makes them
	// unmatched.
	ExtraLayers string      `json:"extra_layers"`
	Rules       []ShardRule `json:"rules"`
	Source      string      `json:"source"`
}

// ShardRule says how a tensor is split across ranks. Pattern is a dotted
// module path ("#" matches the layer index, "*" any one segment); a
// tensor matches when its name is the pattern plus one parameter suffix
// from Params, or, with Exact, the pattern itself.
type ShardRule struct {
	Pattern string `json:"pattern"`
	Exact   bool   `json:"exact"`
	// Kind: "replicated", "column" (output dim ÷ TP), "row" (input dim ÷
	// TP), "qkv_q" (query heads ÷ TP), "qkv_kv" (KV heads ÷ TP, one head
	// kept per rank when TP exceeds them), "vocab" (rows padded, ÷ TP),
	// "heads" (per-head vector ÷ TP), "expert_column"/"expert_row" (one
	// expert: whole on its EP rank, else split like column/row),
	// "fused_expert" (all experts in one tensor: ExpertDim ÷ EP, else
	// TPDim ÷ TP), "skip" (not loaded).
	Kind string `json:"kind"`
	// Stage places non-layer tensors in the pipeline: "first", "last";
	// "" for layer tensors (placed by their layer index).
	Stage     string `json:"stage"`
	TPDim     int    `json:"tp_dim"`
	ExpertDim int    `json:"expert_dim"`
	// PadIntermediate: TPDim is an MXFP4 intermediate dimension padded to
	// WeightFacts.MXFP4IntermediatePad per partition.
	PadIntermediate bool `json:"pad_intermediate"`
}

// FactsFile is data/engine_facts.json.
// Params and RuleSets are shared by every entry that does not carry its
// own (vLLM's model files change less often than its accounting); an
// entry's digest covers the rules it resolves to.
type FactsFile struct {
	Schema        string        `json:"schema"`
	SchemaVersion int           `json:"schema_version"`
	Sources       []FactSource  `json:"sources"`
	Params        []ParamRule   `json:"params"`
	RuleSets      []RuleSet     `json:"rule_sets"`
	Entries       []EngineFacts `json:"entries"`
}

// FactSource names a vLLM source file once, for the entries that cite it
// by Key in their Source fields.
type FactSource struct {
	Key  string `json:"key"`
	URL  string `json:"url"`
	Note string `json:"note"`
}

// DefaultVLLMVersion is the version a plan assumes when none is given:
// the release line the seed calibration set was logged with.
const DefaultVLLMVersion = "0.11.0"

// FactsSchema names the facts file format.
const (
	FactsSchema        = "narwhal.memory.engine_facts"
	FactsSchemaVersion = 1
)

//go:embed data/engine_facts.json
var factsJSON []byte

var loadFactsFile = sync.OnceValues(func() (FactsFile, error) { return parseFactsFile(factsJSON) })

// parseFactsFile decodes and checks a facts file strictly: unknown
// fields, a wrong schema or an entry without its core facts are errors.
func parseFactsFile(b []byte) (FactsFile, error) {
	var f FactsFile
	if err := decodeVersioned("engine facts", b, &f, FactsSchema, FactsSchemaVersion); err != nil {
		return FactsFile{}, err
	}
	for i := range f.Entries {
		e := &f.Entries[i]
		if len(e.Params) == 0 {
			e.Params = f.Params
		}
		if len(e.RuleSets) == 0 {
			e.RuleSets = f.RuleSets
		}
		if _, err := evidence.ParseVersion(e.MinVersion); err != nil {
			return FactsFile{}, fmt.Errorf("engine facts: entries[%d].min_version: %w", i, err)
		}
		if _, err := evidence.ParseVersion(e.MaxVersion); err != nil {
			return FactsFile{}, fmt.Errorf("engine facts: entries[%d].max_version: %w", i, err)
		}
		if e.Defaults.BlockSize <= 0 || e.Weights.VocabPadding <= 0 || len(e.Defaults.Batch) == 0 {
			return FactsFile{}, fmt.Errorf("engine facts: entries[%d] (%s) lacks block size, vocab padding or batch defaults", i, e.Version)
		}
	}
	return f, nil
}

// SupportedVersions lists the version ranges the facts file covers, as
// "label [min, max)".
func SupportedVersions() []string {
	f, err := loadFactsFile()
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range f.Entries {
		out = append(out, fmt.Sprintf("%s [%s, %s)", e.Version, e.MinVersion, e.MaxVersion))
	}
	return out
}

// LoadFacts returns the pinned facts for a vLLM version ("0.11.0", or a
// minor like "0.11") and the digest of that entry. A version no entry
// covers gets the nearest preceding entry (nearestEntry) with Fallback set,
// so the plan can widen its band and say so; only a malformed version is
// an error.
func LoadFacts(version string) (EngineFacts, string, error) {
	f, err := loadFactsFile()
	if err != nil {
		return EngineFacts{}, "", err
	}
	v, err := evidence.ParseVersion(normalizeVersion(version))
	if err != nil {
		return EngineFacts{}, "", fmt.Errorf("--vllm-version %q: %v; give a release such as 0.11.0", version, err)
	}
	if len(f.Entries) == 0 {
		return EngineFacts{}, "", fmt.Errorf("engine facts: no entries; the embedded data/engine_facts.json is broken, rebuild narwhal")
	}
	i, dist := nearestEntry(f.Entries, v)
	e := f.Entries[i]
	d, err := FactsDigest(e)
	if dist > 0 {
		e.Fallback = &FactsFallback{Requested: v.String(), Distance: dist}
	}
	return e, d, err
}

// nearestEntry is the index of the entry covering v (distance 0), else
// of the nearest entry not newer than v, else (v older than every entry)
// of the oldest. The preceding entry, not the nearer newer one, because a
// change vLLM made at a release stays in the releases after it (the
// CUDA-graph subtraction, default since 0.21.0, is not in 0.19).
func nearestEntry(es []EngineFacts, v evidence.Version) (int, int) {
	best, bestDist, oldest := -1, 0, 0
	for i, e := range es {
		if mustVersion(e.MinVersion).Compare(mustVersion(es[oldest].MinVersion)) < 0 {
			oldest = i
		}
		d := rangeDistance(e, v)
		if d == 0 {
			return i, 0
		}
		if v.Compare(mustVersion(e.MaxVersion)) >= 0 && (best < 0 || d < bestDist) {
			best, bestDist = i, d
		}
	}
	if best < 0 {
		return oldest, rangeDistance(es[oldest], v)
	}
	return best, bestDist
}

// rangeDistance counts the minor releases between v and an entry's range
// [min, max): 0 inside it, else the minors to its first or last minor.
func rangeDistance(e EngineFacts, v evidence.Version) int {
	lo, hi := mustVersion(e.MinVersion), mustVersion(e.MaxVersion)
	switch {
	case v.Compare(lo) < 0:
		return minorIndex(lo) - minorIndex(v)
	case v.Compare(hi) >= 0:
		return minorIndex(v) - minorIndex(hi) + 1
	}
	return 0
}

// minorIndex numbers minor release lines so that their difference counts
// minors (a major release counts as 1000).
func minorIndex(v evidence.Version) int { return v.Major*1000 + v.Minor }

// mustVersion parses a version parseFactsFile has already checked.
func mustVersion(s string) evidence.Version {
	v, _ := evidence.ParseVersion(s)
	return v
}

// FallbackNote is the plan note for facts standing in for another
// version, or "" when they cover it.
func (e EngineFacts) FallbackNote() string {
	fb := e.Fallback
	if fb == nil {
		return ""
	}
	return fmt.Sprintf("vLLM %s planned with the facts of %s [%s, %s): no pinned facts cover it (%d minor release(s) away); the available-KV band is widened by %s of requested memory each side",
		fb.Requested, e.Version, e.MinVersion, e.MaxVersion, fb.Distance, fallbackWidenLabel(fb.Distance))
}

// Fallback widening: 1 % of requested memory per minor release of
// distance, at most 10 %. A judgement, not a measurement: vLLM's non-KV
// overheads moved by a few percent of memory between the pinned ranges.
const (
	fallbackWidenPerMinor = 0.01
	fallbackWidenMax      = 0.10
)

func fallbackWidenFraction(dist int) float64 {
	return min(fallbackWidenMax, fallbackWidenPerMinor*float64(dist))
}

func fallbackWidenLabel(dist int) string {
	return fmt.Sprintf("%g %%", fallbackWidenFraction(dist)*100)
}

// FactsDigest is the digest of one facts entry's canonical form.
func FactsDigest(e EngineFacts) (string, error) {
	_, d, err := canon.MarshalDigest(e)
	if err != nil {
		return "", fmt.Errorf("engine facts %s: %w", e.Version, err)
	}
	return d, nil
}

// FactsSources are the vLLM sources the facts cite, by key.
func FactsSources() []FactSource {
	f, _ := loadFactsFile()
	return slices.Clone(f.Sources)
}

func normalizeVersion(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if strings.Count(v, ".") == 1 {
		v += ".0"
	}
	return v
}

// decodeVersioned strictly decodes one of the calculator's data files into
// v and checks it names the schema and version this build reads; what
// names the file in errors.
func decodeVersioned(what string, b []byte, v any, schema string, version int) error {
	if err := canon.DecodeStrict(b, v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var h struct {
		Schema        string `json:"schema"`
		SchemaVersion int    `json:"schema_version"`
	}
	_ = json.Unmarshal(b, &h) // DecodeStrict has read b already
	if h.Schema != schema || h.SchemaVersion != version {
		return fmt.Errorf("%s: schema %q v%d, want %q v%d", what, h.Schema, h.SchemaVersion, schema, version)
	}
	return nil
}
