package diagnose

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
