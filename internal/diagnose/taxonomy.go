package diagnose

import "strings"

// Family is a failure family of the seed taxonomy (reference/evidence.md
// §2.11.4). The set is closed: a failure no matcher recognises is
// FamilyUnrecognized, never the nearest family.
type Family string

// Families. The names follow Apron's injected failure classes where one
// exists (oom_weight_load, oom_kv_cache, max_model_len, dtype_incompatible,
// tp_divisibility, quant_compute_capability).
const (
	FamilyOOMWeightLoad       Family = "oom_weight_load"          // CUDA OOM while loading weights
	FamilyOOMCUDAGraph        Family = "oom_cuda_graph"           // CUDA OOM while capturing CUDA graphs
	FamilyOOMKVCache          Family = "oom_kv_cache"             // KV cache cannot hold one max_model_len request (V0 and V1)
	FamilyNoKVCacheMemory     Family = "no_kv_cache_memory"       // no memory for cache blocks / negative KV budget
	FamilyStartupFreeMemory   Family = "startup_free_memory"      // free memory at start-up below gpu_memory_utilization
	FamilyMaxModelLen         Family = "max_model_len"            // max_model_len above the model's derived limit
	FamilyUnsupportedArch     Family = "unsupported_architecture" // architecture not in vLLM's registry
	FamilyQuantCapability     Family = "quant_compute_capability" // quantization needs a newer GPU
	FamilyBF16Unsupported     Family = "bf16_unsupported"         // bfloat16 on a pre-Ampere GPU
	FamilyDTypeIncompatible   Family = "dtype_incompatible"       // the model does not support float16
	FamilyTPDivisibility      Family = "tp_divisibility"          // TP does not divide the attention heads
	FamilyDistributedInit     Family = "distributed_init"         // NCCL / torch.distributed init failures
	FamilyPortInUse           Family = "port_in_use"              // [Errno 98] Address already in use
	FamilyGatedRepo           Family = "gated_repo"               // 401 / 403 from the model hub
	FamilyMissingChatTemplate Family = "missing_chat_template"    // chat request without a chat template
	FamilyNIXLHandshake       Family = "nixl_handshake"           // NIXL handshake refused (vllm-protocol §9.6)
	FamilyEngineDead          Family = "engine_dead"              // engine core died during a request
	FamilyOOMKilled           Family = "oom_killed"               // process killed by the kernel OOM killer
	FamilyUnrecognized        Family = "unrecognized"
)

// Families lists every family in taxonomy order (the order matchers are
// tried in), FamilyUnrecognized last.
func Families() []Family {
	return []Family{
		FamilyOOMKVCache, FamilyNoKVCacheMemory, FamilyStartupFreeMemory, FamilyMaxModelLen,
		FamilyOOMCUDAGraph, FamilyOOMWeightLoad, FamilyUnsupportedArch, FamilyQuantCapability,
		FamilyBF16Unsupported, FamilyDTypeIncompatible, FamilyTPDivisibility, FamilyPortInUse,
		FamilyGatedRepo, FamilyMissingChatTemplate, FamilyNIXLHandshake, FamilyDistributedInit,
		FamilyOOMKilled, FamilyEngineDead, FamilyUnrecognized,
	}
}

// Valid reports whether f is a member of the closed set.
func (f Family) Valid() bool {
	for _, g := range Families() {
		if f == g {
			return true
		}
	}
	return false
}

// UnmarshalJSON refuses values outside the closed set.
func (f *Family) UnmarshalJSON(b []byte) error { return unmarshalEnum(b, f, Family.Valid, "family") }

// familySpec is a family's fingerprint normalization: the exception
// classes and call-site modules vLLM's V0 and V1 code raise it from, and
// the one spelling each folds to, so the same failure has one fingerprint
// across engine generations. An observed class or module outside the
// accepted set is kept as observed: a new call site is a new fingerprint.
type familySpec struct {
	class   string   // canonical class; "" when the failure has no exception
	classes []string // accepted observed classes
	module  string   // canonical call-site module; "" when none
	modules []string // accepted observed modules: prefixes ending in "." or exact names
	// consequence families report what killed an engine; they rank below
	// every root cause and take the root cause's exception when the log
	// has one.
	consequence bool
}

var familySpecs = map[Family]familySpec{
	FamilyOOMKVCache: {class: "ValueError", classes: []string{"ValueError"},
		module: "vllm.v1.core.kv_cache_utils", modules: []string{"vllm.v1.core.", "vllm.worker.worker", "vllm.worker.", "vllm.core.", "vllm.v1.engine.core"}},
	FamilyNoKVCacheMemory: {class: "ValueError", classes: []string{"ValueError"},
		module: "vllm.v1.core.kv_cache_utils", modules: []string{"vllm.v1.core.", "vllm.worker.worker", "vllm.worker.", "vllm.v1.worker.", "vllm.v1.engine.core"}},
	FamilyStartupFreeMemory: {class: "ValueError", classes: []string{"ValueError"},
		module: "vllm.v1.worker.gpu_worker", modules: []string{"vllm.v1.worker.", "vllm.worker."}},
	FamilyMaxModelLen: {class: "ValueError", classes: []string{"ValueError", "pydantic_core._pydantic_core.ValidationError", "pydantic.ValidationError", "ValidationError"},
		module: "vllm.config.model", modules: []string{"vllm.config.", "vllm.config", "vllm.engine.arg_utils"}},
	FamilyOOMCUDAGraph: {class: "torch.OutOfMemoryError", classes: []string{"torch.OutOfMemoryError", "RuntimeError", "torch.AcceleratorError"},
		module: "vllm.v1.worker.gpu_model_runner", modules: []string{"vllm.v1.worker.", "vllm.worker.model_runner", "vllm.compilation.", "vllm.v1.cudagraph_dispatcher", "vllm.model_executor."}},
	FamilyOOMWeightLoad: {class: "torch.OutOfMemoryError", classes: []string{"torch.OutOfMemoryError", "RuntimeError"},
		module: "vllm.model_executor.model_loader", modules: []string{"vllm.model_executor.", "vllm.v1.worker.", "vllm.worker."}},
	FamilyUnsupportedArch: {class: "ValueError", classes: []string{"ValueError", "pydantic_core._pydantic_core.ValidationError", "ValidationError"},
		module: "vllm.model_executor.models.registry", modules: []string{"vllm.model_executor.models.", "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.", "vllm.config.", "vllm.config", "vllm.engine.arg_utils", "vllm.transformers_utils."}},
	FamilyQuantCapability: {class: "ValueError", classes: []string{"ValueError", "pydantic_core._pydantic_core.ValidationError", "ValidationError"},
		module: "vllm.config.vllm", modules: []string{"vllm.config.", "vllm.config", "vllm.engine.arg_utils", "vllm.model_executor.layers.quantization."}},
	FamilyBF16Unsupported: {class: "ValueError", classes: []string{"ValueError"},
		module: "vllm.platforms.cuda", modules: []string{"vllm.platforms.", "vllm.worker.", "vllm.v1.worker.", "vllm.config."}},
	FamilyDTypeIncompatible: {class: "ValueError", classes: []string{"ValueError", "pydantic_core._pydantic_core.ValidationError", "ValidationError"},
		module: "vllm.config.model", modules: []string{"vllm.config.", "vllm.config", "vllm.engine.arg_utils"}},
	FamilyTPDivisibility: {class: "ValueError", classes: []string{"ValueError", "pydantic_core._pydantic_core.ValidationError", "ValidationError"},
		module: "vllm.config.model", modules: []string{"vllm.config.", "vllm.config", "vllm.engine.arg_utils"}},
	FamilyPortInUse: {class: "OSError", classes: []string{"OSError", "RuntimeError", "torch.distributed.DistNetworkError", "DistNetworkError"},
		module: "vllm.entrypoints.openai.api_server", modules: []string{"vllm.entrypoints.", "vllm.utils", "vllm.utils.", "vllm.distributed."}},
	FamilyGatedRepo: {class: "huggingface_hub.errors.GatedRepoError", classes: []string{"huggingface_hub.errors.GatedRepoError", "GatedRepoError", "OSError", "huggingface_hub.errors.HfHubHTTPError", "requests.exceptions.HTTPError"},
		module: "vllm.transformers_utils.config", modules: []string{"vllm.transformers_utils.", "vllm.config.", "vllm.config", "vllm.engine.arg_utils", "vllm.model_executor.model_loader."}},
	FamilyMissingChatTemplate: {class: "ValueError", classes: []string{"ValueError", "ChatTemplateResolutionError", "vllm.entrypoints.chat_utils.ChatTemplateResolutionError", "jinja2.exceptions.TemplateError"},
		module: "vllm.entrypoints.chat_utils", modules: []string{"vllm.entrypoints.", "vllm.transformers_utils.", "vllm.renderers."}},
	FamilyNIXLHandshake: {class: "RuntimeError", classes: []string{"RuntimeError", "ValueError", "msgspec.ValidationError", "msgspec.DecodeError"},
		module: "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector", modules: []string{"vllm.distributed.kv_transfer."}},
	FamilyDistributedInit: {class: "RuntimeError", classes: []string{"RuntimeError", "torch.distributed.DistBackendError", "DistBackendError", "torch.distributed.DistNetworkError", "DistNetworkError", "torch.distributed.DistStoreError"},
		module: "vllm.distributed.device_communicators.pynccl_wrapper", modules: []string{"vllm.distributed.", "vllm.worker.", "vllm.v1.worker.", "vllm.v1.executor.", "vllm.executor."}},
	FamilyOOMKilled: {consequence: true},
	FamilyEngineDead: {class: "EngineDeadError", classes: []string{"EngineDeadError", "AsyncEngineDeadError", "vllm.engine.async_llm_engine.AsyncEngineDeadError", "MQEngineDeadError", "vllm.engine.multiprocessing.MQEngineDeadError"},
		module: "vllm.v1.engine.core", modules: []string{"vllm.v1.engine.", "vllm.engine."}, consequence: true},
}

// rank is a family's position in the taxonomy order: lower wins.
func (f Family) rank() int {
	for i, g := range Families() {
		if f == g {
			return i
		}
	}
	return len(Families())
}

// canonicalClass folds an observed class into the family's spelling.
func (s familySpec) canonicalClass(observed string) string {
	if observed == "" {
		return s.class
	}
	for _, c := range s.classes {
		if c == observed {
			return s.class
		}
	}
	return observed
}

// canonicalModule folds an observed call site into the family's. A bare
// file stem (from a log header, when no traceback exists) matches an
// accepted module with that last component.
func (s familySpec) canonicalModule(observed string) string {
	if observed == "" {
		return s.module
	}
	for _, m := range s.modules {
		switch {
		case strings.HasSuffix(m, "."):
			if strings.HasPrefix(observed, m) {
				return s.module
			}
		case observed == m:
			return s.module
		}
	}
	if !strings.Contains(observed, ".") {
		if observed == lastComponent(s.module) {
			return s.module
		}
		for _, m := range s.modules {
			if !strings.HasSuffix(m, ".") && lastComponent(m) == observed {
				return s.module
			}
		}
	}
	return observed
}

func lastComponent(m string) string {
	if i := strings.LastIndexByte(m, '.'); i >= 0 {
		return m[i+1:]
	}
	return m
}
