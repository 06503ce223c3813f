package memory

// CalibrationSet is the seed calibration set: measured figures from
// published vLLM startup logs, each entry with its source URL, against
// which the activation, non-torch and CUDA-graph formulas are checked;
// the uncertainty bands are the spread of the residuals.
type CalibrationSet struct {
	Schema        string             `json:"schema"`
	SchemaVersion int                `json:"schema_version"`
	Entries       []CalibrationEntry `json:"entries"`
}

// CalibrationEntry is one published startup log. Pointers are nil where
// the log does not state the figure; Notes say what the log leaves open.
type CalibrationEntry struct {
	ID          string `json:"id"`
	SourceURL   string `json:"source_url"`
	Model       string `json:"model"`
	ConfigURL   string `json:"config_url"`
	GPU         string `json:"gpu"`
	VLLMVersion string `json:"vllm_version"`

	Arch   CalibrationArch   `json:"arch"`
	Launch CalibrationLaunch `json:"launch"`
	Logged LoggedFigures     `json:"logged"`
	Notes  string            `json:"notes"`
}

// CalibrationArch are the architecture facts the formulas read, copied
// from the model's published config.json (ConfigURL).
type CalibrationArch struct {
	Mechanism        Mechanism `json:"mechanism"`
	FFN              string    `json:"ffn"`
	HiddenSize       int64     `json:"hidden_size"`
	IntermediateSize int64     `json:"intermediate_size"` // dense MLP (or per-expert for MoE)
	VocabSize        int64     `json:"vocab_size"`
	NumLayers        int64     `json:"num_layers"`
	NumHeads         int64     `json:"num_heads"`
	NumKVHeads       int64     `json:"num_kv_heads"`
	HeadDim          int64     `json:"head_dim"`
	NumExperts       int64     `json:"num_experts"`
	TopK             int64     `json:"top_k"`
	DTypeBytes       int64     `json:"dtype_bytes"`
}

// CalibrationLaunch are the launch parameters the log states or implies.
type CalibrationLaunch struct {
	TP                   int      `json:"tp"`
	PP                   int      `json:"pp"`
	MaxModelLen          *int64   `json:"max_model_len"`
	MaxNumBatchedTokens  *int64   `json:"max_num_batched_tokens"`
	MaxNumSeqs           *int64   `json:"max_num_seqs"`
	GPUMemoryUtilization *float64 `json:"gpu_memory_utilization"`
	EnforceEager         bool     `json:"enforce_eager"`
}

// LoggedFigures are the figures as the log prints them (GiB with two
// decimals, tokens).
type LoggedFigures struct {
	WeightsGiB          *float64 `json:"weights_gib"`
	NonTorchGiB         *float64 `json:"non_torch_gib"`
	ActivationPeakGiB   *float64 `json:"activation_peak_gib"`
	KVCacheGiB          *float64 `json:"kv_cache_gib"`
	CUDAGraphGiB        *float64 `json:"cudagraph_gib"`
	KVCacheTokens       *int64   `json:"kv_cache_tokens"`
	MaxConcurrency      *float64 `json:"max_concurrency"`
	ConcurrencyAtTokens *int64   `json:"concurrency_at_tokens"`
	TotalMemoryGiB      *float64 `json:"total_memory_gib"`
}
