package memory

// EngineFacts are the pinned memory facts of one vLLM version range
// (reference/evidence.md §2.8.3, §3.5): the startup accounting formula,
// defaults and the per-tensor sharding rules. They are data
// (data/engine_facts.json), each fact with the vLLM source it was read
// from; the Prediction records the digest of the entry used.
type EngineFacts struct {
	Version     string       `json:"version"`     // the range label, e.g. "0.10"
	MinVersion  string       `json:"min_version"` // inclusive, e.g. "0.10.0"
	MaxVersion  string       `json:"max_version"` // exclusive, e.g. "0.11.0"
	Description string       `json:"description"`
	Accounting  Accounting   `json:"accounting"`
	Defaults    Defaults     `json:"defaults"`
	KV          KVFacts      `json:"kv"`
	Sharding    []ShardRule  `json:"sharding"`
	Sources     []FactSource `json:"sources"`
	Uncertain   []string     `json:"uncertain"` // facts recorded as not verified for this version
}

// Accounting is how the version turns total memory into a KV budget
// (§3.5.2).
type Accounting struct {
	// Formula names the accounting: "requested_minus_non_kv" (V1 from
	// 0.8.x: requested − (weights + torch peak increase + non-torch
	// increase) − applied CUDA-graph estimate).
	Formula string `json:"formula"`
	// RequestedRounding: "ceil" (requested = ceil(total × util)) or
	// "none" (a float product truncated by the allocator arithmetic).
	RequestedRounding string `json:"requested_rounding"`
	// SubtractsCUDAGraphEstimate: the version subtracts a profiled
	// CUDA-graph estimate from the KV budget by default.
	SubtractsCUDAGraphEstimate bool `json:"subtracts_cudagraph_estimate"`
	// MinAcrossWorkers: the engine takes the minimum KV budget over ranks.
	MinAcrossWorkers bool   `json:"min_across_workers"`
	Source           string `json:"source"`
}

// Defaults are the version's launch defaults the plan fills in.
type Defaults struct {
	BlockSize            int64   `json:"block_size"`
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	MaxNumSeqs           int64   `json:"max_num_seqs"`
	MaxNumBatchedTokens  int64   `json:"max_num_batched_tokens"`
	// MaxCaptureSize is the largest CUDA-graph batch size captured by
	// default; CaptureSizes the list itself.
	MaxCaptureSize   int64   `json:"max_capture_size"`
	CaptureSizes     []int64 `json:"capture_sizes"`
	VocabPadding     int64   `json:"vocab_padding"` // DEFAULT_VOCAB_PADDING_SIZE
	MXFP4PadMultiple int64   `json:"mxfp4_pad_multiple"`
	Source           string  `json:"source"`
}

// KVFacts are the KV-cache sizing rules of the version.
type KVFacts struct {
	// HybridAllocator: sliding-window layers are sized by their window
	// (the hybrid KV cache manager) rather than as full attention.
	HybridAllocator bool `json:"hybrid_allocator"`
	// SlidingWindowTokens names the per-request bound of a sliding
	// layer: "window_minus_1_plus_batched" = min(window − 1 +
	// max_num_batched_tokens, max_model_len).
	SlidingWindowTokens string `json:"sliding_window_tokens"`
	// DTypeBytes maps kv_cache_dtype values (other than auto) to bytes
	// per element.
	DTypeBytes map[string]int64 `json:"dtype_bytes"`
	Source     string           `json:"source"`
}

// ShardRule says how a tensor whose name matches Pattern is split across
// ranks. Pattern is a dotted name with "*" for one segment and "#" for the
// layer index segment; the first matching rule wins.
type ShardRule struct {
	Pattern string `json:"pattern"`
	// Kind: "column" (output dim ÷ TP), "row" (input dim ÷ TP),
	// "replicated", "vocab" (rows padded then ÷ TP), "qkv_kv" (KV-head
	// outputs: replicated when TP exceeds the KV heads), "expert_column",
	// "expert_row", "fused_expert_column", "fused_expert_row" (experts ÷
	// EP, or split like column/row when EP is off), "heads" (per-head
	// vector ÷ TP).
	Kind   string `json:"kind"`
	Source string `json:"source"`
}

// FactSource is one vLLM source a fact was read from.
type FactSource struct {
	Fact string `json:"fact"`
	URL  string `json:"url"`
	Note string `json:"note"`
}
