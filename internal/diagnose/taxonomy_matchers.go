package diagnose

import "regexp"

// The matchers. Each recognises one wording of one failure (or, with no
// family, a line that only states facts, or a start-up progress line that
// moves a process's phase). Needles are literal substrings a matching line
// must contain; the automaton finds them, and only then do the patterns
// run. Wordings and their sources are listed in testdata/corpus/README.md.

// mflag qualifies a matcher.
type mflag uint8

const (
	// mWeak: evidence only when nothing else explains the log (a process
	// "died unexpectedly" says nothing about why).
	mWeak mflag = 1 << iota
	// mCrash: a native crash (segfault, abort); it blocks the weak
	// OOM-killer inference.
	mCrash
	// mShutdown: an operator-initiated shutdown. vLLM also logs "died
	// unexpectedly" on a clean shutdown (vllm-project/vllm#27557), so a
	// weak hit after one proves nothing.
	mShutdown
)

// familyOOM is the internal family of a CUDA out-of-memory error before
// its call stack and phase say whether weights or graph capture ran out.
const familyOOM Family = "_oom"

type matcher struct {
	wording Wording
	family  Family // "" for facts-only and phase matchers
	needles []string
	res     []rx
	phase   phase // a progress line sets the process's phase
	flags   mflag
}

// Patterns shared by several matchers.
const (
	reDec = `(-?[0-9]+(?:\.[0-9]+)?)`
	reMem = `([0-9]+(?:\.[0-9]+)?) ?(GiB|MiB|KiB|GB|MB|bytes|B)`
)

// cfgKV captures a "key=value" of vLLM's config and args lines up to its
// delimiter; dtype values drop their "torch." prefix.
func cfgKV(key string) string {
	if key == "dtype" {
		return `\bdtype=(?:torch\.)?([^,\s)]{1,64})`
	}
	return `\b` + key + `=([^,\s)]{1,64})`
}

// dictKV and dictStr capture a value of the "non-default args: {…}" dict.
func dictKV(key string) string  { return `'` + key + `': ([^,}\s]{1,64})` }
func dictStr(key string) string { return `'` + key + `': '([^']{0,64})'` }

func re(expr string, caps ...capture) rx { return rx{re: regexp.MustCompile(expr), caps: caps} }
func opt(expr string, caps ...capture) rx {
	return rx{re: regexp.MustCompile(expr), caps: caps, optional: true}
}
func cp(group int, f fieldID, k capKind) capture { return capture{group: group, field: f, kind: k} }
func cconst(f fieldID, text string) capture      { return capture{field: f, kind: ckConst, text: text} }
func cint(f fieldID, i int64) capture            { return capture{field: f, kind: ckConstInt, i: i} }

// Wordings (one per matcher; a closed set).
const (
	WordV1KVNeeded          Wording = "v1_kv_cache_needed_larger_than_available"
	WordV0KVTokens          Wording = "v0_max_seq_len_larger_than_kv_cache_tokens"
	WordNoCacheBlocks       Wording = "no_available_memory_for_cache_blocks"
	WordAutoFitFailed       Wording = "cannot_auto_fit_max_model_len"
	WordNegativeKVBudget    Wording = "negative_kv_cache_budget"
	WordFreeOnStartup       Wording = "free_memory_on_startup_below_utilization"
	WordMaxLenDerived       Wording = "max_model_len_greater_than_derived"
	WordCUDAOOM             Wording = "cuda_out_of_memory"
	WordCUDAErrorOOM        Wording = "cuda_error_out_of_memory"
	WordLinearWeightsOOM    Wording = "failed_to_create_linear_weights"
	WordArchNotSupported    Wording = "model_architectures_not_supported"
	WordTransformersArch    Wording = "transformers_does_not_recognize_architecture"
	WordQuantMethodCC       Wording = "quantization_method_not_supported_for_gpu"
	WordQuantSchemeCC       Wording = "quantization_scheme_not_supported_for_gpu"
	WordBF16CC              Wording = "bfloat16_needs_compute_capability_8"
	WordFloat16NotSupp      Wording = "model_type_does_not_support_float16"
	WordTPHeads             Wording = "attention_heads_not_divisible_by_tp"
	WordNCCLError           Wording = "nccl_error"
	WordDistError           Wording = "torch_distributed_error"
	WordAddrInUse           Wording = "address_already_in_use"
	WordGatedRepo           Wording = "gated_repo"
	WordChatTemplate        Wording = "missing_chat_template"
	WordNIXLHash            Wording = "nixl_compatibility_hash_mismatch"
	WordNIXLDecode          Wording = "nixl_handshake_payload_decode_failed"
	WordNIXLEngineID        Wording = "nixl_remote_engine_id_mismatch"
	WordNIXLLayout          Wording = "nixl_heterogeneous_tp_kv_layout"
	WordNIXLBlockSize       Wording = "nixl_hma_remote_block_size"
	WordNIXLHandshakeFailed Wording = "nixl_handshake_failed"
	WordHubUnauthorized     Wording = "hub_unauthorized_401"
	WordEngineFatal         Wording = "engine_core_fatal_error"
	WordEngineDead          Wording = "engine_dead_error"
	WordV0EngineDead        Wording = "v0_background_loop_errored"
	WordKilled              Wording = "process_killed"
	WordExit137             Wording = "exit_code_sigkill"
	WordDiedUnexpectedly    Wording = "process_died_unexpectedly"
	WordRayOOMKilled        Wording = "ray_memory_monitor_killed"
	wordNativeCrash         Wording = "native_crash"
	wordShutdown            Wording = "shutdown"
	wordFacts               Wording = "facts"
	wordPhase               Wording = "phase"
	wordEngineDiedCoreProc  Wording = "failed_core_proc_exit"
)

// matchers are the failure, facts and phase matchers, then the facts of
// vLLM's memory-accounting lines, built from vllmlog's table
// (facts_memory.go).
var matchers = append(ownMatchers, memoryMatchers()...)

var ownMatchers = []matcher{
	// KV cache cannot hold one max-length request (vllm-protocol §14).
	{wording: WordV1KVNeeded, family: FamilyOOMKVCache, needles: []string{"KV cache is needed, which is larger than the available KV cache memory"},
		res: []rx{
			re(`max seq len \(([0-9]+)\), \(?`+reDec+` GiB KV cache is needed, which is larger than the available KV cache memory \(`+reDec+` GiB\)`,
				cp(1, fMaxLen, ckInt), cp(2, fKVNeeded, ckGiB), cp(3, fKVAvailable, ckGiB)),
			opt(`estimated maximum model length is ([0-9]+)`, cp(1, fEstMaxLen, ckInt)),
		}},
	{wording: WordV0KVTokens, family: FamilyOOMKVCache, needles: []string{"is larger than the maximum number of tokens that can be stored in KV cache"},
		res: []rx{re(`max seq len \(([0-9]+)\) is larger than the maximum number of tokens that can be stored in KV cache \(([0-9]+)\)`,
			cp(1, fMaxLen, ckInt), cp(2, fKVTokens, ckInt))}},
	{wording: WordNoCacheBlocks, family: FamilyNoKVCacheMemory, needles: []string{"No available memory for the cache blocks"}},
	// A negative KV budget is the failure itself even where the log stops
	// before vLLM's "No available memory" error (a cut paste, an engine
	// core that died first): V1 gpu_worker.py "Available KV cache memory:
	// %.2f GiB", V0 worker.py "the rest of the memory reserved for KV Cache
	// is %.2fGiB" (0.6.6–0.8) and "kv_cache_size=%.2fGiB" (0.6.4–0.6.5);
	// sources in vllmlog/patterns.go [g1] and [p0]. The needles (the
	// wording with its minus sign) name the failure; the budget itself is
	// read by the memory-line facts of the same line (facts_memory.go).
	{wording: WordNegativeKVBudget, family: FamilyNoKVCacheMemory, needles: []string{"Available KV cache memory: -", "reserved for KV Cache is -", "kv_cache_size=-"}},
	{wording: WordAutoFitFailed, family: FamilyNoKVCacheMemory, needles: []string{"Cannot auto-fit max_model_len: not enough GPU memory"}},
	// V1's "Free memory on device (F/T GiB) on startup is less than desired
	// GPU memory utilization (U, R GiB)" ([u1]): the figures are read by
	// the memory-line facts of the same line (facts_memory.go).
	{wording: WordFreeOnStartup, family: FamilyStartupFreeMemory, needles: []string{"on startup is less than desired GPU memory utilization"}},
	{wording: WordMaxLenDerived, family: FamilyMaxModelLen, needles: []string{"is greater than the derived max_model_len"},
		res: []rx{
			re(`User-specified max_model_len \(([0-9]+)\) is greater than the derived max_model_len`, cp(1, fMaxLen, ckInt)),
			opt(`derived max_model_len \([A-Za-z_]*=([0-9]+(?:\.0)?)`, cp(1, fDerivedMaxLen, ckIntish)),
		}},

	// CUDA allocator failures; weights or graphs is decided by the stack.
	{wording: WordCUDAOOM, family: familyOOM, needles: []string{"CUDA out of memory"},
		res: []rx{
			opt(`Tried to allocate `+reMem, cp(1, fTried, ckMem)),
			opt(`total capacity of `+reMem+` of which `+reMem+` is free`, cp(1, fTotal, ckMem), cp(3, fFree, ckMem)),
			opt(reMem+` is allocated by PyTorch`, cp(1, fPTAllocated, ckMem)),
			opt(`\(GPU [0-9]+; `+reMem+` total capacity; `+reMem+` already allocated; `+reMem+` free`,
				cp(1, fTotal, ckMem), cp(3, fPTAllocated, ckMem), cp(5, fFree, ckMem)),
		}},
	{wording: WordCUDAErrorOOM, family: familyOOM, needles: []string{"CUDA error: out of memory"}},
	// UnquantizedLinearMethod.create_weights catches the allocator's OOM,
	// logs "Failed to create unquantized linear weights: %s" and raises
	// RuntimeError("Failed to create unquantized linear weights. This may be
	// caused by insufficient memory to allocate the weight."): a weight
	// allocation by construction, whatever the stack shows
	// (vllm/model_executor/layers/linear.py at
	// 9e109c9887e38c51fc16b0da89760c5bd7c293c9; real log
	// vllm-project/vllm#28143).
	{wording: WordLinearWeightsOOM, family: FamilyOOMWeightLoad, needles: []string{"Failed to create unquantized linear weights"},
		res: []rx{opt(`Tried to allocate `+reMem, cp(1, fTried, ckMem)), opt(`total capacity of `+reMem+` of which `+reMem+` is free`, cp(1, fTotal, ckMem), cp(3, fFree, ckMem))}},

	// Configuration the engine or the GPU refuses.
	// The message may reach us cut (a pasted line, a container's line
	// limit): the architecture list is optional, the wording is not. When
	// the "Supported architectures" list that follows names the model's own
	// architecture, vLLM registers it and failed to import it.
	{wording: WordArchNotSupported, family: FamilyUnsupportedArch, needles: []string{"are not supported for now"},
		res: []rx{
			re(`(?:Model architectures|are not supported for now\. Supported architectures)`),
			opt(`Model architectures \[([^\]]{1,200})\] are not supported for now`, cp(1, fArch, ckArchList)),
			opt(`Model architectures \[([^\]]{1,200})\] are not supported for now\. Supported architectures: (?:dict_keys\()?\[([^\]]*)`,
				cp(1, fArchRegistered, ckArchListed)),
		}},
	{wording: WordTransformersArch, family: FamilyUnsupportedArch, needles: []string{"but Transformers does not recognize this architecture"}},
	{wording: WordQuantMethodCC, family: FamilyQuantCapability, needles: []string{"is not supported for the current GPU. Minimum capability"},
		res: []rx{re(`The quantization method (\S{1,64}) is not supported for the current GPU\. Minimum capability: ([0-9]+)\. Current capability: ([0-9]+)`,
			cp(1, fQuant, ckText), cp(2, fReqCC, ckCCInt), cp(3, fCC, ckCCInt))}},
	// compressed-tensors raises RuntimeError with three string arguments, so
	// Python prints the message as a tuple: "('Quantization scheme is not
	// supported for ', 'the current GPU. Min capability: 80. ', 'Current
	// capability: 75.')" (the exact-match form says "Required capability").
	{wording: WordQuantSchemeCC, family: FamilyQuantCapability, needles: []string{"Quantization scheme is not supported for"},
		res: []rx{re(`(?:Min|Required) capability: (?:', ')?([0-9]+)\. ?(?:', ')?Current capability: ([0-9]+)`, cp(1, fReqCC, ckCCInt), cp(2, fCC, ckCCInt))}},
	{wording: WordBF16CC, family: FamilyBF16Unsupported, needles: []string{"Bfloat16 is only supported on GPUs with compute capability"},
		res: []rx{
			re(`compute capability of at least ([0-9]+\.[0-9]+)`, cp(1, fReqCC, ckCCDot), cconst(fDType, "bfloat16")),
			opt(`Your (.{1,80}?) GPU (?:has compute capability|does not have)`, cp(1, fGPU, ckText)),
			opt(`GPU has compute capability ([0-9]+\.[0-9]+)`, cp(1, fCC, ckCCDot)),
		}},
	{wording: WordFloat16NotSupp, family: FamilyDTypeIncompatible, needles: []string{"does not support float16"},
		res: []rx{re(`The model type '[A-Za-z0-9_]{1,64}' does not support float16`, cconst(fDType, "float16"))}},
	{wording: WordTPHeads, family: FamilyTPDivisibility, needles: []string{"must be divisible by tensor parallel size"},
		res: []rx{re(`Total number of attention heads \(([0-9]+)\) must be divisible by tensor parallel size \(([0-9]+)\)`,
			cp(1, fHeads, ckInt), cp(2, fTP, ckInt))}},

	// Processes, ports, networks.
	{wording: WordAddrInUse, family: FamilyPortInUse, needles: []string{"Address already in use", "address already in use", "EADDRINUSE"},
		res: []rx{
			opt(`bind on address \('[^']{0,64}', ([0-9]{1,5})\)`, cp(1, fPort, ckInt)),
			opt(`\bport: ([0-9]{1,5})\b`, cp(1, fPort, ckInt)),
		}},
	{wording: WordNCCLError, family: FamilyDistributedInit, needles: []string{"NCCL error:", "NCCL error in:"}},
	{wording: WordDistError, family: FamilyDistributedInit, needles: []string{"DistNetworkError", "DistBackendError", "DistStoreError"}},
	// A bare 401 from the hub: huggingface_hub's RepositoryNotFoundError and
	// requests' HTTPError say neither "gated" nor "restricted" (a private or
	// gated repository without a token, or a bad token); a paste may end
	// right after the status (vllm-project/vllm#8331).
	{wording: WordHubUnauthorized, family: FamilyGatedRepo, needles: []string{"401 Client Error"},
		res: []rx{re(`401 Client Error(?:[.:]? ?(?:Unauthorized for url: https?://(?:huggingface\.co|hf\.co)/|\(Request ID:)|:?$)`, cint(fHTTP, 401))}},
	{wording: WordGatedRepo, family: FamilyGatedRepo, needles: []string{"Cannot access gated repo", "GatedRepoError", "You are trying to access a gated repo", "is restricted and you are not in the authorized list", "is restricted. You must have access to it and be authenticated"},
		res: []rx{opt(`\b(401|403) Client Error`, cp(1, fHTTP, ckInt))}},
	{wording: WordChatTemplate, family: FamilyMissingChatTemplate, needles: []string{"default chat template is no longer allowed", "ChatTemplateResolutionError", "must provide a chat template", "tokenizer.chat_template is not set"}},
	{wording: WordNIXLHash, family: FamilyNIXLHandshake, needles: []string{"NIXL compatibility hash mismatch"}},
	{wording: WordNIXLDecode, family: FamilyNIXLHandshake, needles: []string{"Failed to decode NixlHandshakePayload"}},
	{wording: WordNIXLEngineID, family: FamilyNIXLHandshake, needles: []string{"Remote NIXL agent engine ID mismatch"}},
	{wording: WordNIXLLayout, family: FamilyNIXLHandshake, needles: []string{"Heterogeneous TP expects same kv_cache_layout"}},
	{wording: WordNIXLBlockSize, family: FamilyNIXLHandshake, needles: []string{"HMA does not support different remote block size"}},
	// Since vllm-project/vllm pull 32031 (2026-01) every NIXL failure is one
	// "NIXL transfer failure: <failure_type> | Context: {…}" line; the
	// handshake kinds are handshake_setup_failed and handshake_failed. The
	// older text was "Handshake with <engine id> failed".
	{wording: WordNIXLHandshakeFailed, family: FamilyNIXLHandshake, needles: []string{"NIXL transfer failure: handshake_", "Handshake with "},
		res: []rx{re(`NIXL transfer failure: handshake_(?:setup_)?failed\b|Handshake with \S{1,128} failed`)}},

	// Engine death and the kernel's OOM killer.
	{wording: WordEngineFatal, family: FamilyEngineDead, needles: []string{"EngineCore encountered a fatal error", "Engine core died", "EngineCore encountered an issue"}},
	{wording: WordEngineDead, family: FamilyEngineDead, needles: []string{"EngineDeadError"}},
	{wording: WordV0EngineDead, family: FamilyEngineDead, needles: []string{"Background loop has errored already"}},
	{wording: WordKilled, family: FamilyOOMKilled, needles: []string{"Killed", "oom-kill", "OOMKilled"},
		res: []rx{re(`^Killed\s*$|(?:^|\s)Killed\s+\S*(?:python|vllm)|Out of memory: Killed process|\boom-kill\b|\bOOMKilled\b`, cint(fSignal, 9))}},
	{wording: WordExit137, family: FamilyOOMKilled, needles: []string{"code 137", "code: 137", "code=137", "status 137", "code -9", "code: -9", "exitcode=-9", "exitcode -9", "exitcode  : -9", "Signal 9 (SIGKILL) received"},
		res: []rx{
			re(`(?:exit(?:ed with)? (?:code|status)|exitcode)[ :=]*(?:137|-9)\b|Signal 9 \(SIGKILL\) received`, cint(fSignal, 9)),
			opt(`(?:exit(?:ed with)? (?:code|status)|exitcode)[ :=]*(137|-9)\b`, cp(1, fExit, ckInt)),
		}},
	{wording: wordEngineDiedCoreProc, family: FamilyOOMKilled, needles: []string{"Failed core proc(s):"},
		res: []rx{re(`Failed core proc\(s\): \{'[A-Za-z0-9_]{1,40}': (-9|137)\}`, cp(1, fExit, ckInt), cint(fSignal, 9))}},
	// Ray's memory monitor kills a worker before the kernel would: the host
	// ran out of memory all the same (real logs: vllm-project/vllm#2669,
	// vllm-project/vllm#1160).
	{wording: WordRayOOMKilled, family: FamilyOOMKilled, needles: []string{"killed due to memory pressure (OOM)", "Ray killed this worker"}},
	{wording: WordDiedUnexpectedly, family: FamilyOOMKilled, needles: []string{"died unexpectedly"}, flags: mWeak},
	{wording: wordShutdown, needles: []string{"KeyboardInterrupt", "Shutting down", "received SIGTERM", "received SIGINT", "Received signal", "shutdown requested"}, flags: mShutdown},
	{wording: wordNativeCrash, needles: []string{"Segmentation fault", "Fatal Python error", "core dumped", "SIGSEGV", "SIGABRT"}, flags: mCrash},

	// Start-up facts (any family may use them). A value is captured up to
	// its delimiter and then validated whole: "fp8;rm -rf /" is rejected,
	// never trimmed down to "fp8".
	{wording: wordFacts, needles: []string{"LLM engine (v"}, res: []rx{
		opt(`Initializing an? (?:(V[01]) )?LLM engine \(v([^)\s]{1,64})\)`, cp(1, fEra, ckText), cp(2, fVersion, ckVersion)),
		opt(cfgKV("dtype"), cp(1, fDType, ckText)),
		opt(cfgKV("max_seq_len"), cp(1, fMaxLen, ckInt)),
		opt(cfgKV("tensor_parallel_size"), cp(1, fTP, ckInt)),
		opt(cfgKV("pipeline_parallel_size"), cp(1, fPP, ckInt)),
		opt(cfgKV("quantization"), cp(1, fQuant, ckText)),
	}},
	{wording: wordFacts, needles: []string{"vLLM API server version "}, res: []rx{opt(`vLLM API server version v?(\S{1,64})`, cp(1, fVersion, ckVersion))}},
	{wording: wordFacts, needles: []string{"non-default args: {"}, res: []rx{
		opt(dictKV("max_model_len"), cp(1, fMaxLen, ckInt)),
		opt(dictKV("tensor_parallel_size"), cp(1, fTP, ckInt)),
		opt(dictKV("pipeline_parallel_size"), cp(1, fPP, ckInt)),
		opt(dictKV("gpu_memory_utilization"), cp(1, fUtil, ckRatio)),
		opt(dictStr("dtype"), cp(1, fDType, ckText)),
		opt(dictStr("quantization"), cp(1, fQuant, ckText)),
		opt(dictKV("port"), cp(1, fPort, ckInt)),
	}},
	{wording: wordFacts, needles: []string{"args: Namespace("}, res: []rx{
		opt(cfgKV("max_model_len"), cp(1, fMaxLen, ckInt)),
		opt(cfgKV("tensor_parallel_size"), cp(1, fTP, ckInt)),
		opt(cfgKV("pipeline_parallel_size"), cp(1, fPP, ckInt)),
		opt(cfgKV("gpu_memory_utilization"), cp(1, fUtil, ckRatio)),
		opt(`\bdtype='([^']{0,64})'`, cp(1, fDType, ckText)),
		opt(`\bquantization='([^']{0,64})'`, cp(1, fQuant, ckText)),
		opt(cfgKV("port"), cp(1, fPort, ckInt)),
	}},
	{wording: wordFacts, needles: []string{"01 Client Error", "03 Client Error"}, res: []rx{opt(`\b(401|403) Client Error`, cp(1, fHTTP, ckInt))}},
	{wording: wordFacts, needles: []string{"Resolved architecture: "}, res: []rx{opt(`Resolved architecture: (\S{1,128})`, cp(1, fArch, ckText))}},
	{wording: wordFacts, needles: []string{"Uvicorn running on ", "Starting vLLM API server"}, res: []rx{opt(`https?://[0-9A-Za-z.\[\]:-]{1,64}:([0-9]{1,5})\b`, cp(1, fPort, ckInt))}},

	// Start-up progress: which phase a process is in.
	{wording: wordPhase, needles: []string{"Starting to load model", "Loading weights", "Loading safetensors checkpoint shards", "Loading model weights"}, phase: phaseLoading},
	{wording: wordPhase, needles: []string{"Capturing cudagraphs", "Capturing CUDA graph", "Capturing the model for CUDA graphs"}, phase: phaseCapturing},
}
