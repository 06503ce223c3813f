// Package memory is narwhal's GPU-free memory calculator (ADR-006 §4, §5;
// reference/evidence.md §2.8, §3.5): from an artifact's real tensor headers,
// its config.json, a GPU, a launch configuration and the pinned facts of
// one vLLM version it predicts the weight bytes each rank loads, the KV
// bytes per token, the memory vLLM leaves for the KV cache and what that
// buys (tokens, blocks, feasible max_model_len, concurrency).
//
// The calculator is deterministic (INV-42): no clock, no environment, no
// map order in its output; the same inputs give a byte-identical
// Prediction. Every figure that is not derived from the headers comes from
// a data file embedded in the package (engine facts, GPU table, seed
// calibration set) whose digest the Prediction records. What the
// calculator does not implement is reported as unknown with a reason,
// never replaced by a plausible constant (INV-32).
package memory

import (
	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
	"github.com/narwhal-go/narwhal/internal/evidence/quant"
)

// ComponentStatus says how a memory component is known.
type ComponentStatus string

// Component statuses (reference/evidence.md §2.8.2).
const (
	// StatusDerived: computed from the headers and config by exact
	// arithmetic under the pinned engine facts (weights, KV per token).
	StatusDerived ComponentStatus = "derived"
	// StatusPredicted: a per-mechanism formula whose band is calibrated
	// against measured records (activation peak, non-torch, CUDA graphs),
	// or a figure computed from predicted components.
	StatusPredicted ComponentStatus = "predicted"
	// StatusUnknown: the calculator cannot say; Reason tells why.
	StatusUnknown ComponentStatus = "unknown"
)

// PredictionStatus is known when every component the result depends on
// is derived or predicted, unknown otherwise.
type PredictionStatus string

// Prediction statuses.
const (
	PredictionKnown   PredictionStatus = "known"
	PredictionUnknown PredictionStatus = "unknown"
)

// Component is one labelled memory figure with its uncertainty band:
// Lower ≤ Bytes ≤ Upper. A derived component has Lower = Bytes = Upper.
// An unknown component has all three 0 and a Reason. Sources are digests
// of the data the figure was computed from (engine facts, calibration
// set) or calibration entry ids, sorted.
type Component struct {
	Bytes  int64           `json:"bytes"`
	Lower  int64           `json:"lower"`
	Upper  int64           `json:"upper"`
	Status ComponentStatus `json:"status"`
	Reason string          `json:"reason"`
	Source []string        `json:"source"`
}

// Known reports whether the component has a value.
func (c Component) Known() bool { return c.Status == StatusDerived || c.Status == StatusPredicted }

// Mechanism is an attention (or sequence-mixing) mechanism the KV side
// dispatches on (INV-32). Only the first three are implemented.
type Mechanism string

// Mechanisms.
const (
	MechDense         Mechanism = "dense_attention"  // MHA, GQA, MQA over the full context
	MechMLA           Mechanism = "mla"              // DeepSeek-style latent attention
	MechSlidingWindow Mechanism = "sliding_window"   // every layer windowed
	MechHybridSliding Mechanism = "hybrid_sliding"   // sliding and full layers mixed (Gemma-2, gpt-oss)
	MechHybridMamba   Mechanism = "hybrid_mamba"     // Mamba/SSM layers (not implemented)
	MechLinearAttn    Mechanism = "linear_attention" // linear/recurrent attention (not implemented)
	MechEncoderDec    Mechanism = "encoder_decoder"  // cross-attention models (not implemented)
	MechPooling       Mechanism = "pooling"          // embedding / pooling models: no generation KV plan (not implemented)
	MechUnknown       Mechanism = "unknown"          // not recognised
)

// HardwareSpec is the GPU one rank runs on.
type HardwareSpec struct {
	Name              string `json:"name"`
	DeviceName        string `json:"device_name"`        // as torch names it; vLLM's batch defaults match on it
	TotalMemoryBytes  int64  `json:"total_memory_bytes"` // as the driver reports (torch.cuda.mem_get_info total)
	MemoryBasis       string `json:"memory_basis"`       // "vllm_log", "nominal" or "user"
	ComputeCapability string `json:"compute_capability"` // "9.0"; "" when not known
	Count             int    `json:"count"`              // GPUs available; 0 = as many as the topology needs
}

// LaunchConfig are the vLLM launch parameters that change memory. A zero
// value means "vLLM's default for the pinned version" and is resolved from
// the engine facts; the resolved values are recorded in the Prediction.
type LaunchConfig struct {
	TP                    int     `json:"tp"`
	PP                    int     `json:"pp"`
	DP                    int     `json:"dp"`
	EnableExpertParallel  bool    `json:"enable_expert_parallel"`
	MaxModelLen           int64   `json:"max_model_len"` // 0 = the model's max_position_embeddings
	MaxNumSeqs            int64   `json:"max_num_seqs"`
	MaxNumBatchedTokens   int64   `json:"max_num_batched_tokens"`
	GPUMemoryUtilization  float64 `json:"gpu_memory_utilization"`
	KVCacheDType          string  `json:"kv_cache_dtype"` // "", "auto", "fp8", "fp8_e4m3", "fp8_e5m2"
	BlockSize             int64   `json:"block_size"`
	EnforceEager          bool    `json:"enforce_eager"`
	CUDAGraphCaptureSizes []int64 `json:"cudagraph_capture_sizes"` // nil = the version's default
	KVCacheMemoryBytes    *int64  `json:"kv_cache_memory_bytes"`   // --kv-cache-memory: skips profiling
	Quantization          string  `json:"quantization"`            // runtime --quantization; "" = the checkpoint's own
	DType                 string  `json:"dtype"`                   // --dtype; "" / "auto" = the checkpoint's
}

// PlanInput is everything a plan is computed from. Config is config.json
// as read; Headers are every tensor header of the artifact.
type PlanInput struct {
	Headers artifact.Headers
	Config  []byte
	// Quant is the quantization adapter's spec for the checkpoint
	// (quant.Detect); its workspaces give the load-time kernel memory.
	// Nil for a quantized checkpoint leaves that memory unknown.
	Quant       *quant.QuantizationSpec
	Hardware    HardwareSpec
	Facts       EngineFacts
	Launch      LaunchConfig
	Calibration CalibrationSet
}

// RankPrediction is the figures of one pipeline stage's worst rank (TP
// ranks of a stage are symmetric except for uneven expert placement, and
// the heaviest is the one reported).
type RankPrediction struct {
	PPRank           int             `json:"pp_rank"`
	FirstLayer       int64           `json:"first_layer"`
	EndLayer         int64           `json:"end_layer"` // exclusive
	Weights          WeightBreakdown `json:"weights"`
	WeightBytes      Component       `json:"weight_bytes"`
	KVBytesPerToken  int64           `json:"kv_bytes_per_token"` // every layer of the rank counted as full attention
	AvailableKVBytes Component       `json:"available_kv_bytes"`
	NumBlocks        int64           `json:"num_blocks"`
	NeededKVBytes    int64           `json:"needed_kv_bytes"` // one request at max_model_len
}

// Prediction is the result of a plan (reference/evidence.md §2.8.2 plus the
// resolved inputs that make it self-describing). Every field is always
// present; canon.Marshal of a Prediction is its record form.
type Prediction struct {
	Schema         string           `json:"schema"`
	SchemaVersion  int              `json:"schema_version"`
	Status         PredictionStatus `json:"status"`
	UnknownReasons []string         `json:"unknown_reasons"`

	Architecture  string       `json:"architecture"`
	Mechanism     Mechanism    `json:"mechanism"`
	FFN           string       `json:"ffn"` // "dense" or "moe"
	Hardware      HardwareSpec `json:"hardware"`
	Launch        LaunchConfig `json:"launch"` // resolved: defaults filled in
	EngineVersion string       `json:"engine_version"`

	RequestedBytes     int64     `json:"requested_bytes"` // total × gpu_memory_utilization, rounded as the version does
	WeightBytesPerRank Component `json:"weight_bytes_per_rank"`
	ActivationPeak     Component `json:"activation_peak"` // torch peak increase during the profile run
	NonTorch           Component `json:"non_torch"`
	CUDAGraphEstimate  Component `json:"cudagraph_estimate"`
	CUDAGraphApplied   bool      `json:"cudagraph_applied"` // the version subtracts it from the KV budget
	AvailableKVBytes   Component `json:"available_kv_bytes"`
	// LoadWorkspace is the transient memory kernel preparation takes while
	// weights load (Marlin repacking, block-scale relayout). It is freed
	// before profiling, so it never enters the KV budget; it is reported
	// so that it is not silently ignored.
	LoadWorkspace Component `json:"load_workspace"`

	KVBytesPerToken        int64   `json:"kv_bytes_per_token"` // per rank, all layers of that rank
	BlockSize              int64   `json:"block_size"`
	NumBlocks              int64   `json:"num_blocks"`
	KVCapacityTokens       int64   `json:"kv_capacity_tokens"` // vLLM's "GPU KV cache size: N tokens"
	MaxFeasibleModelLen    int64   `json:"max_feasible_model_len"`
	MaxConcurrencyAtMaxLen float64 `json:"max_concurrency_at_max_len"`
	Fits                   bool    `json:"fits"`
	MarginBytes            int64   `json:"margin_bytes"` // lower edge of the available-KV band minus one max-length request, worst rank
	BlocksPerRequest       int64   `json:"blocks_per_request"`
	KVBytesPerTokenLayer   int64   `json:"kv_bytes_per_token_layer"`
	ModelDTypeBytes        int64   `json:"model_dtype_bytes"`
	KVCacheDTypeBytes      int64   `json:"kv_cache_dtype_bytes"`
	GPUsNeeded             int     `json:"gpus_needed"`
	// Notes are caveats that do not make the prediction unknown (a
	// nominal GPU memory figure, calibration carried across versions).
	Notes []string `json:"notes"`

	Ranks             []RankPrediction `json:"ranks"`
	EngineFactsDigest string           `json:"engine_facts_digest"`
	CalibrationDigest string           `json:"calibration_digest"`
	GPUTableDigest    string           `json:"gpu_table_digest"`
	ConfigDigest      string           `json:"config_digest"`
	HeadersDigest     string           `json:"headers_digest"`
}

// PredictionSchema names the Prediction record form.
const (
	PredictionSchema        = "narwhal.memory.prediction"
	PredictionSchemaVersion = 1
)

// Plan computes the prediction for in. An error is bad input (a config
// that is not JSON, a topology that is impossible); what the calculator
// does not know is not an error but an unknown prediction.
func Plan(in PlanInput) (Prediction, error) {
	return plan(in)
}
