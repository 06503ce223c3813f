// Package fleet is the fleet document, narwhal.fleet schema version 1: one
// model served by one engine fleet. It loads, validates, resolves endpoint
// environment references, saves and inspects fleet files. It performs no
// network or runtime work; paths are stored, not opened.
package fleet

import "sort"

// Schema and SchemaVersion identify the fleet document this build reads
// and writes.
const (
	Schema        = "narwhal.fleet"
	SchemaVersion = 1
)

// Role is an engine's phase label. A role change is only a label: every
// engine can serve either phase.
type Role string

// The two roles.
const (
	Prefill Role = "prefill"
	Decode  Role = "decode"
)

// Config is a loaded, defaulted and validated fleet document. The JSON
// tags and field order are those of the saved document (Save).
type Config struct {
	Model          string          `json:"model"`
	Engines        []Engine        `json:"engines"`
	SLO            SLO             `json:"slo"`
	Controller     Controller      `json:"controller"`
	Serving        Serving         `json:"serving"`
	Engine         EngineSettings  `json:"engine"`
	Recovery       Recovery        `json:"recovery"`
	Profiles       Profiles        `json:"profiles"`
	EngineContract *EngineContract `json:"engine_contract,omitempty"`
	Hardware       *Hardware       `json:"hardware,omitempty"`
}

// Engine is one vLLM engine instance.
type Engine struct {
	IID            string `json:"iid"`
	URL            string `json:"url"` // resolved, without trailing '/'
	AttestationURL string `json:"attestation_url,omitempty"`
	Role           Role   `json:"role"`
	Pin            bool   `json:"pin,omitempty"`
}

// SLO holds the latency targets, in seconds.
type SLO struct {
	TTFT float64 `json:"ttft_s"`
	TPOT float64 `json:"tpot_s"`
}

// Controller configures monitoring and role control.
type Controller struct {
	MonitorIntervalS    float64    `json:"monitor_interval_s"`
	MonitorFailureLimit int        `json:"monitor_failure_limit"`
	Advisory            bool       `json:"advisory"`
	MinPrefill          int        `json:"min_prefill"`
	MinDecode           int        `json:"min_decode"`
	FlipHistory         int        `json:"flip_history"`
	Thresholds          Thresholds `json:"thresholds"`
	Reactive            Reactive   `json:"reactive"`
}

// Thresholds are the pool-load thresholds and thrash guards.
type Thresholds struct {
	Expand             float64 `json:"expand"`
	Shrink             float64 `json:"shrink"`
	CooldownS          float64 `json:"cooldown_s"`
	DwellS             float64 `json:"dwell_s"`
	SustainedIntervals int     `json:"sustained_intervals"`
	PanicRatio         float64 `json:"panic_ratio"`
	FlipResidentGuard  int     `json:"flip_resident_guard"`
}

// Reactive configures the adjacent-split controller's demand model.
type Reactive struct {
	WindowS                    float64 `json:"window_s"`
	Confirmations              int     `json:"confirmations"`
	Utilization                float64 `json:"utilization"`
	MinArrivals                int     `json:"min_arrivals"`
	DemandFloor                float64 `json:"demand_floor"`
	MovementMargin             float64 `json:"movement_margin"`
	StepS                      float64 `json:"step_s"`
	EvidenceSpanS              float64 `json:"evidence_span_s"`
	EvidenceMaxSpanS           float64 `json:"evidence_max_span_s"`
	EvidenceMinArrivals        int     `json:"evidence_min_arrivals"`
	DemandRiseTolerance        float64 `json:"demand_rise_tolerance"`
	DecodeCorrectionMin        float64 `json:"decode_correction_min"`
	DecodeCorrectionMax        float64 `json:"decode_correction_max"`
	DecodeCorrectionAlpha      float64 `json:"decode_correction_alpha"`
	DecodeCorrectionMinSamples int     `json:"decode_correction_min_samples"`
}

// Serving configures admission, timeouts, queueing, retries and body limits.
type Serving struct {
	Admission         string  `json:"admission"`
	AdmissionMargin   float64 `json:"admission_margin"`
	MaxConnections    int     `json:"max_connections"`
	RequestTimeoutS   float64 `json:"request_timeout_s"`
	PrefillTimeoutS   float64 `json:"prefill_timeout_s"`
	GracefulTimeoutS  float64 `json:"graceful_timeout_s"`
	QueueCapacity     int     `json:"queue_capacity"`
	QueueTimeoutS     float64 `json:"queue_timeout_s"`
	PrefillConcurrent int     `json:"prefill_concurrency"`
	DecodeConcurrent  int     `json:"decode_concurrency"`
	// DeadlineQueue bounds the requests waiting for room while their TTFT
	// target can still be met (0: refuse at once); DeadlineQueueKVTokens
	// bounds their KV (0: the decode pool's capacity).
	DeadlineQueue         int     `json:"deadline_queue"`
	DeadlineQueueKVTokens int     `json:"deadline_queue_kv_tokens"`
	HandoffTimeoutS       float64 `json:"handoff_timeout_s"`
	MaxAttempts           int     `json:"max_attempts"`
	RetryBaseS            float64 `json:"retry_base_s"`
	RetryCapS             float64 `json:"retry_cap_s"`
	RetryBudget           int     `json:"retry_budget"`
	RetryReplenish        float64 `json:"retry_replenish"`
	MaxRequestBytes       int     `json:"max_request_bytes"`
	MaxResponseBytes      int     `json:"max_response_bytes"`
	// CORSOrigins are the browser origins (scheme://host[:port]) allowed
	// to call /v1/*; empty sends no CORS headers at all.
	CORSOrigins []string `json:"cors_origins"`
}

// Admission modes.
const (
	AdmissionPredictive = "predictive"
	AdmissionOpen       = "open"
)

// EngineSettings configures how the router talks to engines.
type EngineSettings struct {
	Connector                 string  `json:"connector"`
	Dialect                   string  `json:"dialect"`
	Tokenize                  bool    `json:"tokenize"`
	CharsPerToken             float64 `json:"chars_per_token"`
	TokenizeTimeoutS          float64 `json:"tokenize_timeout_s"`
	EngineAPIKeyEnv           string  `json:"engine_api_key_env"`
	ControlConnections        int     `json:"control_connections"`
	PoolTimeoutS              float64 `json:"pool_timeout_s"`
	ConnectTimeoutS           float64 `json:"connect_timeout_s"`
	HealthTimeoutS            float64 `json:"health_timeout_s"`
	DecodeReadTimeoutS        float64 `json:"decode_read_timeout_s"`
	FirstTokenTimeoutS        float64 `json:"first_token_timeout_s"`
	FirstTokenCalibrationPath string  `json:"first_token_calibration_path"`
}

// Recovery configures the breaker, liveness, restart policy and state.
type Recovery struct {
	EjectAfter          int     `json:"eject_after"`
	ReadmitEvery        int     `json:"readmit_every"`
	LivenessEvery       int     `json:"liveness_every"`
	LivenessMisses      int     `json:"liveness_misses"`
	EngineRestartPolicy string  `json:"engine_restart_policy"`
	FailureQuarantineS  float64 `json:"failure_quarantine_s"`
	StatePath           string  `json:"state_path"`
	Resume              bool    `json:"resume"`
	Health              Health  `json:"health"`
	Lease               Lease   `json:"lease"`
}

// Restart policies.
const (
	RestartIndividual = "individual"
	RestartWholeWave  = "whole_wave"
)

// Health configures residual scoring of engine pace.
type Health struct {
	WindowS           float64 `json:"window_s"`
	DriftBand         float64 `json:"drift_band"`
	MinSamples        int     `json:"min_samples"`
	ProbationWindows  int     `json:"probation_windows"`
	EvictWindows      int     `json:"evict_windows"`
	RecoveryWindows   int     `json:"recovery_windows"`
	ProbationPenaltyS float64 `json:"probation_penalty_s"`
	RelativeBand      float64 `json:"relative_band"`
}

// Profiles locates the profile store and its acceptance limits.
type Profiles struct {
	Path             string  `json:"path"`
	MaxDecodeFitMAPE float64 `json:"max_decode_fit_mape"`
	MaxDecodeCVMAPE  float64 `json:"max_decode_cv_mape"`
}

// Hardware is the one engine shape the whole fleet shares.
type Hardware struct {
	Accelerator           string `json:"accelerator"`
	AcceleratorsPerEngine int    `json:"accelerators_per_engine"`
	TensorParallel        int    `json:"tensor_parallel"`
}

// EngineContract is the one engine generation every engine must match
// before KV moves between them.
type EngineContract struct {
	VLLMVersion            string `json:"vllm_version"`
	ImageDigest            string `json:"image_digest"`
	NIXLVersion            string `json:"nixl_version"`
	NIXLConnectorVersion   int    `json:"nixl_connector_version"`
	ModelArchitecture      string `json:"model_architecture"`
	ModelDtype             string `json:"model_dtype"`
	KVHeads                int    `json:"kv_heads"`
	HeadSize               int    `json:"head_size"`
	HiddenLayers           int    `json:"hidden_layers"`
	AttentionBackend       string `json:"attention_backend"`
	KVCacheDtype           string `json:"kv_cache_dtype"`
	CrossLayersBlocks      *bool  `json:"cross_layers_blocks"`
	HybridKVCacheManager   *bool  `json:"hybrid_kv_cache_manager"`
	Connector              string `json:"connector"`
	KVRole                 string `json:"kv_role"`
	TransferMode           string `json:"transfer_mode"`
	SpeculativeConfig      string `json:"speculative_config"`
	EnforceHandshakeCompat bool   `json:"enforce_handshake_compat"`
}

// Defaults returns a configuration with every optional field at its
// default (table.go). Model, Engines and SLO are left empty: they are
// required.
func Defaults() Config {
	var c Config
	applyDefaults(c.fields())
	return c
}

// DefaultContract is an engine_contract with every field at its default;
// only vllm_version is required on top.
func DefaultContract() EngineContract {
	var k EngineContract
	applyDefaults(contractFields(&k))
	return k
}

// IIDs are the engines' ids, sorted: the order every component that walks
// the fleet (router, supervisor, lifecycle) keeps.
func (c *Config) IIDs() []string {
	out := make([]string, 0, len(c.Engines))
	for _, e := range c.Engines {
		out = append(out, e.IID)
	}
	sort.Strings(out)
	return out
}
