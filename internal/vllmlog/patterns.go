package vllmlog

import (
	"regexp"
	"regexp/syntax"
	"slices"
)

// The memory-accounting lines vLLM prints at startup, V0 and V1, across
// versions: the one table of them, read by evidence/memory (observations)
// and diagnose (facts). Each pattern names the vLLM source that prints it
// and a public log showing it. Patterns match one segment each, so a message printed over several
// lines (V0 prints its profiling summary as one message with newlines)
// or wrapped when pasted is still read.
//
// Sources (vllm-project/vllm):
//   [w0]  vllm/worker/model_runner.py (V0): "Loading model weights took %.4f GB" (÷ 2**30),
//         later "Model loading took %.4f GB and %.6f seconds" (÷ 2**30), then "… GiB …";
//         https://github.com/vllm-project/vllm/blob/v0.6.6/vllm/worker/model_runner.py
//   [p0]  vllm/worker/worker.py (V0) determine_num_available_blocks:
//         v0.6.4 "Memory profiling results: total_gpu_memory=%.2fGiB initial_memory_usage=%.2fGiB
//         peak_torch_memory=%.2fGiB memory_usage_post_profile=%.2fGib non_torch_memory=%.2fGiB
//         kv_cache_size=%.2fGiB gpu_memory_utilization=%.2f" (v0.6.5 adds "duration=…" and commas);
//         v0.6.6–v0.8 "Memory profiling takes %.2f seconds\nthe current vLLM instance can use
//         total_gpu_memory (%.2fGiB) x gpu_memory_utilization (%.2f) = %.2fGiB\nmodel weights
//         take %.2fGiB; non_torch_memory takes %.2fGiB; PyTorch activation peak memory takes
//         %.2fGiB; the rest of the memory reserved for KV Cache is %.2fGiB.";
//         https://github.com/vllm-project/vllm/blob/v0.7.3/vllm/worker/worker.py,
//         overhaul: https://github.com/vllm-project/vllm/pull/10511
//   [b0]  vllm/executor/executor_base.py (V0): "# %s blocks: %d, # CPU blocks: %d" (device name,
//         "GPU" in older gpu_executor.py, "cuda" later) and "Maximum concurrency for %s tokens
//         per request: %.2fx"; https://github.com/vllm-project/vllm/blob/v0.7.3/vllm/executor/executor_base.py
//   [w1]  vllm/v1/worker/gpu_model_runner.py: "Model loading took %.4f GiB and %.6f seconds",
//         later "Model loading took %s GiB memory and %.6f seconds" (format_gib);
//         "Graph capturing finished in %.0f secs, took %.2f GiB"; "Estimated CUDA graph memory:
//         %.2f GiB total"; https://github.com/vllm-project/vllm/blob/main/vllm/v1/worker/gpu_model_runner.py
//   [g1]  vllm/v1/worker/gpu_worker.py determine_available_memory: "Available KV cache memory:
//         %.2f GiB" (later %s of format_gib); DEBUG "Initial free memory: %.2f GiB, free memory:
//         %.2f GiB, requested GPU memory: %.2f GiB", later "Initial free memory: %s GiB;
//         Requested memory: %f (util), %s GiB"; "Initial free memory %s GiB, reserved %s GiB
//         memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory
//         profiling."; "CUDA graph memory profiling is enabled (default since v0.21.0). The
//         current --gpu-memory-utilization=%.4f is equivalent to …"; WARNING "CUDA graph memory
//         profiling is disabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). … from %.4f to
//         %.4f."; compile_or_warm_up_model: "CUDA graph pool memory: %s GiB (actual), %s GiB
//         (estimated), difference: …"; "Free memory on device (%s/%s GiB) on startup. Desired
//         GPU memory utilization is (%s, %s GiB). Actual usage is %s GiB for weight, %s GiB for
//         peak activation, %s GiB for non-torch memory, and %s GiB for CUDAGraph memory. Replace
//         gpu_memory_utilization config with `--kv-cache-memory=%d` (%s GiB) to fit into requested
//         memory, or `--kv-cache-memory=%d` (%s GiB) to fully utilize gpu memory. Current kv
//         cache memory in use is %s GiB." (an earlier form reads "… for consumed memory (weights
//         + non-torch), … for peak activation, and … for CUDAGraph memory");
//         https://github.com/vllm-project/vllm/blob/main/vllm/v1/worker/gpu_worker.py; re-read at
//         https://github.com/vllm-project/vllm/blob/35d5cda123ec28581759b6d34cde8052314fb1e6/vllm/v1/worker/gpu_worker.py
//         (determine_available_memory's DEBUG "Initial free memory: %.2f GiB; Requested memory: %.2f
//         (util), %.2f GiB", "Available KV cache memory: %.2f GiB", and compile_or_warm_up_model's
//         "Free memory on device (…/… GiB) on startup. Desired GPU memory utilization is (…, … GiB).
//         Actual usage is … GiB for weight, … for peak activation, … for non-torch memory, and … for
//         CUDAGraph memory. … Current kv cache memory in use is … GiB.")
//   [m1]  vllm/utils/mem_utils.py MemoryProfilingResult.__repr__ (DEBUG, earlier in
//         vllm/utils/__init__.py): "Memory profiling takes %.2f seconds. Total non KV cache
//         memory: %sGiB; torch peak memory increase: %sGiB; non-torch forward increase memory:
//         %sGiB; weights memory: %sGiB."; https://github.com/vllm-project/vllm/blob/main/vllm/utils/mem_utils.py,
//         re-read at https://github.com/vllm-project/vllm/blob/a6d5c39009eb73797b276cc557ca9659c396ca14/vllm/utils/mem_utils.py
//   [k1]  vllm/v1/core/kv_cache_utils.py: "GPU KV cache size: %s tokens" (f"{n:,}") and
//         "Maximum concurrency for %s tokens per request: %.2fx"; the ValueError "… (%s GiB KV
//         cache is needed, which is larger than the available KV cache memory (%s GiB)…";
//         https://github.com/vllm-project/vllm/blob/main/vllm/v1/core/kv_cache_utils.py; the two info
//         lines re-read in _report_kv_cache_config at
//         https://github.com/vllm-project/vllm/blob/001cabc1be16a59a70d720ed61a13b678c060a18/vllm/v1/core/kv_cache_utils.py
//   [u1]  vllm/v1/worker/utils.py (older: gpu_worker.py init_device): "Free memory on device
//         (%s/%s GiB) on startup is less than desired GPU memory utilization (%s, %s GiB)."
//   [r1]  vllm/distributed/parallel_state.py: "world_size=%d rank=%d local_rank=%d
//         distributed_init_method=%s backend=%s"; "rank %s in world size %s is assigned as DP
//         rank %s, PP rank %s, [PCP rank %s, ]TP rank %s, EP rank %s"
//   [n1]  vllm/v1/executor/multiproc_executor.py: worker log prefix "Worker[_DP%d][_PP%d]
//         [_PCP%d][_TP%d][_DCP%d][_EP%d]" — a group appears only when its size exceeds 1.
//   [c1]  vllm/v1/metrics/loggers.py: "Engine %03d: vllm cache_config_info with initialization
//         after num_gpu_blocks is: %d"
//
// Public logs showing these wordings (vllm-project/vllm threads):
//   V0 "Loading model weights took … GB" + "Memory profiling takes" with VllmWorkerProcess
//   prefixes: https://github.com/vllm-project/vllm/issues/11550, https://github.com/vllm-project/vllm/issues/13061,
//   https://github.com/vllm-project/vllm/pull/14447; "# GPU blocks": https://github.com/vllm-project/vllm/issues/5248;
//   V1 "Available KV cache memory"/"GPU KV cache size": https://github.com/vllm-project/vllm/issues/21348;
//   Worker_TP prefixes and assignment lines: https://github.com/vllm-project/vllm/issues/28228,
//   https://github.com/vllm-project/vllm/pull/37505; EngineCore_DP0 and "Model loading took … GiB
//   and … seconds": https://github.com/vllm-project/vllm/pull/25340.

// PatternID names a pattern of the table (memory records it in
// ObservationSource.Pattern). It is an identifier of narwhal's, never
// text read from a log.
type PatternID string

// Pattern identifiers.
const (
	PatV0LoadingWeights      PatternID = "v0_loading_model_weights_took"
	PatModelLoadingTook      PatternID = "model_loading_took"
	PatV0ProfileTotal        PatternID = "v0_profile_total_gpu_memory"
	PatV0ProfileRequested    PatternID = "v0_profile_utilization_requested"
	PatV0ProfileWeights      PatternID = "v0_profile_model_weights_take"
	PatV0ProfileNonTorch     PatternID = "v0_profile_non_torch_memory_takes"
	PatV0ProfileActivation   PatternID = "v0_profile_activation_peak_takes"
	PatV0ProfileRestKV       PatternID = "v0_profile_rest_reserved_for_kv"
	PatV0ResultsTotal        PatternID = "v0_results_total_gpu_memory"
	PatV0ResultsPeakTorch    PatternID = "v0_results_peak_torch_memory"
	PatV0ResultsNonTorch     PatternID = "v0_results_non_torch_memory"
	PatV0ResultsKVCacheSize  PatternID = "v0_results_kv_cache_size"
	PatV0ResultsUtilization  PatternID = "v0_results_gpu_memory_utilization"
	PatV0ResultsDerivedPeak  PatternID = "v0_results_peak_torch_minus_weights"
	PatV0Blocks              PatternID = "v0_num_device_blocks"
	PatMaxConcurrency        PatternID = "max_concurrency_for_tokens"
	PatV1AvailableKV         PatternID = "v1_available_kv_cache_memory"
	PatV1KVCacheSize         PatternID = "v1_gpu_kv_cache_size_tokens"
	PatV1NonKVTotal          PatternID = "v1_profile_total_non_kv_cache"
	PatV1TorchPeakIncrease   PatternID = "v1_profile_torch_peak_increase"
	PatV1NonTorchIncrease    PatternID = "v1_profile_non_torch_forward_increase"
	PatV1WeightsMemory       PatternID = "v1_profile_weights_memory"
	PatV1InitialFree         PatternID = "v1_initial_free_memory"
	PatV1RequestedUtil       PatternID = "v1_requested_memory_util"
	PatV1RequestedGPU        PatternID = "v1_requested_gpu_memory"
	PatV1KVCacheConfigured   PatternID = "v1_kv_cache_memory_bytes_reserved"
	PatV1FreeOnStartup       PatternID = "v1_free_memory_on_device_startup"
	PatV1DesiredUtil         PatternID = "v1_desired_gpu_memory_utilization"
	PatV1UsageWeight         PatternID = "v1_actual_usage_weight"
	PatV1UsagePeakActivation PatternID = "v1_actual_usage_peak_activation"
	PatV1UsageNonTorch       PatternID = "v1_actual_usage_non_torch"
	PatV1UsageConsumed       PatternID = "v1_actual_usage_consumed_weights_non_torch"
	PatV1UsageCUDAGraph      PatternID = "v1_actual_usage_cudagraph"
	PatV1SuggestRequested    PatternID = "v1_suggested_kv_cache_memory_requested"
	PatV1SuggestDevice       PatternID = "v1_suggested_kv_cache_memory_device"
	PatV1KVInUse             PatternID = "v1_current_kv_cache_memory_in_use"
	PatGraphCaptured         PatternID = "graph_capturing_finished_took"
	PatV1GraphPool           PatternID = "v1_cudagraph_pool_memory"
	PatV1GraphEstimated      PatternID = "v1_estimated_cudagraph_memory"
	PatV1GraphProfilingOn    PatternID = "v1_cudagraph_memory_profiling_enabled"
	PatV1GraphProfilingOff   PatternID = "v1_cudagraph_memory_profiling_disabled"
	PatV1KVNeededError       PatternID = "v1_kv_cache_needed_error"
	PatV1NumGPUBlocks        PatternID = "v1_cache_config_num_gpu_blocks"
)

// Target is what a logged figure is: a capture fills one (memory maps
// them onto Observation fields, diagnose onto Facts fields).
type Target int

// Targets. The Sum ones are vLLM's own sums, kept for cross-checks.
const (
	TargetTotal Target = iota
	TargetFree
	TargetRequested
	TargetUtil
	TargetWeights
	TargetTransient
	TargetNonTorch
	TargetGraphEstimate
	TargetGraphApplied
	TargetGraphActual
	TargetAvailableKV
	TargetKVTokens
	TargetBlocks
	TargetConcurrency
	TargetConcurrencyLen
	TargetSumNonKV
	TargetSumTorchPeak
	TargetSumPeakActivation
	TargetSumWeightsNonTorch
	TargetSumGraphSizing
	TargetSumGraphPoolEstimate
	TargetSumSuggestRequested
	TargetSumSuggestDevice
	TargetCount // the number of targets
)

// Kind is how a capture's text becomes a value.
type Kind int

// Kinds.
const (
	KindMemory Kind = iota // a number group and a unit group
	KindBytes              // an exact integer byte count
	KindCount              // tokens or blocks, thousands separators allowed
	KindRatio              // a plain decimal
	KindFlag               // no group: the pattern's presence sets a boolean
)

// Note qualifies what a figure holds when that differs from its target's
// plain meaning: a fact about the line vLLM prints.
type Note string

// Notes.
const (
	NoteNone               Note = "none"
	NoteIncludesPersistent Note = "includes_persistent" // transient peak holds the whole torch peak increase; the persistent split is unknown
	NoteAbsoluteNonTorch   Note = "absolute_non_torch"  // V0 logged all non-torch memory after profiling, not its increase
	NoteEngineLevel        Note = "engine_level"        // an engine-wide figure (vLLM takes the minimum over workers)
	NoteConfigured         Note = "configured"          // kv_cache_memory_bytes was set: a configured budget, profiling skipped
)

// Capture maps regexp groups to a target.
type Capture struct {
	Target Target
	Kind   Kind
	Num    int  // group of the number
	Unit   int  // group of the unit (KindMemory)
	Round  int  // decimals the printing format rounds to at least (%.2f, format_gib: 2)
	Note   Note // what the figure holds when it differs from the target's plain meaning
	Flag   bool // KindFlag value
}

// Pattern is one wording of one memory-accounting line.
type Pattern struct {
	ID      PatternID
	Re      *regexp.Regexp
	Needle  string // a literal the line must contain for Re to match: a cheap pre-check
	Engine  bool   // an engine-wide figure (vLLM's minimum over the workers), not one worker's
	GBIsGiB bool   // the source prints "GB" for a value divided by 2^30
	Startup bool   // the line starts a worker's startup (weights loaded)
	Caps    []Capture
}

// MemoryPatterns is the table, in no significant order. The slice is the
// caller's; the patterns' regexps and captures are shared and read-only.
func MemoryPatterns() []Pattern { return slices.Clone(memoryPatterns) }

// MemoryPattern is the table's pattern id, or false.
func MemoryPattern(id PatternID) (Pattern, bool) {
	for _, p := range memoryPatterns {
		if p.ID == id {
			return p, true
		}
	}
	return Pattern{}, false
}

// vlogMem is a logged memory value: a number and its unit.
const vlogMem = `(-?[0-9]+(?:\.[0-9]+)?)\s*(GiB|Gib|GB|MiB|MB|KiB)`

func vlogM(target Target, num int, note Note) Capture {
	return Capture{Target: target, Kind: KindMemory, Num: num, Unit: num + 1, Round: 2, Note: note}
}

func vlogRatio(target Target, num, round int) Capture {
	return Capture{Target: target, Kind: KindRatio, Num: num, Round: round, Note: NoteNone}
}

func vlogCount(target Target, num int, note Note) Capture {
	return Capture{Target: target, Kind: KindCount, Num: num, Note: note}
}

func vlogFlag(target Target, v bool) Capture {
	return Capture{Target: target, Kind: KindFlag, Flag: v, Note: NoteNone}
}

func vlogPat(id PatternID, expr string, caps ...Capture) Pattern {
	return Pattern{ID: id, Re: regexp.MustCompile(expr), Needle: vlogNeedle(expr), Caps: caps}
}

// vlogNeedle is the longest literal run of expr's top-level concatenation,
// which every match contains.
func vlogNeedle(expr string) string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		panic(err)
	}
	re = re.Simplify()
	best := ""
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	for _, s := range subs {
		if s.Op == syntax.OpLiteral && s.Flags&syntax.FoldCase == 0 && len(s.Rune) > len(best) {
			best = string(s.Rune)
		}
	}
	return best
}

func (p Pattern) engine() Pattern { p.Engine = true; return p }
func (p Pattern) gb() Pattern     { p.GBIsGiB = true; return p }
func (p Pattern) starts() Pattern { p.Startup = true; return p }

// memoryPatterns is the full table, in no significant order.
var memoryPatterns = []Pattern{
	// [w0], [w1]
	vlogPat(PatV0LoadingWeights, `Loading model weights took `+vlogMem, vlogM(TargetWeights, 1, NoteNone)).gb().starts(),
	vlogPat(PatModelLoadingTook, `Model loading took `+vlogMem, vlogM(TargetWeights, 1, NoteNone)).gb().starts(),
	// [p0] v0.6.6–v0.8
	vlogPat(PatV0ProfileTotal, `total_gpu_memory \(`+vlogMem+`\)`, vlogM(TargetTotal, 1, NoteNone)),
	vlogPat(PatV0ProfileRequested, `gpu_memory_utilization \(([0-9]+(?:\.[0-9]+)?)\)\s*=\s*`+vlogMem,
		vlogRatio(TargetUtil, 1, 2), vlogM(TargetRequested, 2, NoteNone)),
	vlogPat(PatV0ProfileWeights, `model weights take `+vlogMem, vlogM(TargetWeights, 1, NoteNone)),
	vlogPat(PatV0ProfileNonTorch, `non_torch_memory takes `+vlogMem, vlogM(TargetNonTorch, 1, NoteNone)),
	vlogPat(PatV0ProfileActivation, `PyTorch activation peak memory takes `+vlogMem, vlogM(TargetTransient, 1, NoteIncludesPersistent)),
	vlogPat(PatV0ProfileRestKV, `the rest of the memory reserved for KV Cache is `+vlogMem, vlogM(TargetAvailableKV, 1, NoteNone),
		vlogFlag(TargetGraphApplied, false)), // V0's worker never subtracted a graph estimate
	// [p0] v0.6.4–v0.6.5 key=value form
	vlogPat(PatV0ResultsTotal, `\btotal_gpu_memory=`+vlogMem, vlogM(TargetTotal, 1, NoteNone)),
	vlogPat(PatV0ResultsPeakTorch, `\bpeak_torch_memory=`+vlogMem, vlogM(TargetSumTorchPeak, 1, NoteNone)),
	vlogPat(PatV0ResultsNonTorch, `\bnon_torch_memory=`+vlogMem, vlogM(TargetNonTorch, 1, NoteAbsoluteNonTorch)),
	vlogPat(PatV0ResultsKVCacheSize, `\bkv_cache_size=`+vlogMem, vlogM(TargetAvailableKV, 1, NoteNone), vlogFlag(TargetGraphApplied, false)),
	vlogPat(PatV0ResultsUtilization, `\bgpu_memory_utilization=([0-9]+(?:\.[0-9]+)?)`, vlogRatio(TargetUtil, 1, 2)),
	// [b0], [k1], [c1]
	vlogPat(PatV0Blocks, `# [A-Za-z]+ blocks: ([0-9]+), # CPU blocks: [0-9]+`, vlogCount(TargetBlocks, 1, NoteEngineLevel)).engine(),
	vlogPat(PatMaxConcurrency, `Maximum concurrency for ([0-9][0-9,]*) tokens per request: ([0-9]+(?:\.[0-9]+)?)x`,
		vlogCount(TargetConcurrencyLen, 1, NoteEngineLevel), vlogRatio(TargetConcurrency, 2, 2)).engine(),
	vlogPat(PatV1KVCacheSize, `GPU KV cache size: ([0-9][0-9,]*) tokens`, vlogCount(TargetKVTokens, 1, NoteEngineLevel)).engine(),
	vlogPat(PatV1NumGPUBlocks, `num_gpu_blocks is: ([0-9]+)`, vlogCount(TargetBlocks, 1, NoteEngineLevel)).engine(),
	// [m1] DEBUG
	vlogPat(PatV1NonKVTotal, `Total non KV cache memory: `+vlogMem, vlogM(TargetSumNonKV, 1, NoteNone)),
	vlogPat(PatV1TorchPeakIncrease, `torch peak memory increase: `+vlogMem, vlogM(TargetTransient, 1, NoteIncludesPersistent)),
	vlogPat(PatV1NonTorchIncrease, `non-torch forward increase memory: `+vlogMem, vlogM(TargetNonTorch, 1, NoteNone)),
	vlogPat(PatV1WeightsMemory, `\bweights memory: `+vlogMem, vlogM(TargetWeights, 1, NoteNone)),
	// [g1]
	vlogPat(PatV1AvailableKV, `Available KV cache memory: `+vlogMem, vlogM(TargetAvailableKV, 1, NoteNone)),
	vlogPat(PatV1InitialFree, `Initial free memory: `+vlogMem, vlogM(TargetFree, 1, NoteNone)),
	vlogPat(PatV1RequestedUtil, `Requested memory: ([0-9]+(?:\.[0-9]+)?) \(util\), `+vlogMem,
		vlogRatio(TargetUtil, 1, 2), vlogM(TargetRequested, 2, NoteNone)),
	vlogPat(PatV1RequestedGPU, `requested GPU memory: `+vlogMem, vlogM(TargetRequested, 1, NoteNone)),
	vlogPat(PatV1KVCacheConfigured, `Initial free memory `+vlogMem+`, reserved `+vlogMem+` memory for KV Cache as specified by kv_cache_memory_bytes`,
		vlogM(TargetFree, 1, NoteNone), vlogM(TargetAvailableKV, 3, NoteConfigured)),
	vlogPat(PatV1FreeOnStartup, `Free memory on device(?: [A-Za-z]+:[0-9]+)? \((-?[0-9]+(?:\.[0-9]+)?)/(-?[0-9]+(?:\.[0-9]+)?) (GiB)\) on startup`,
		Capture{Target: TargetFree, Kind: KindMemory, Num: 1, Unit: 3, Round: 2, Note: NoteNone},
		Capture{Target: TargetTotal, Kind: KindMemory, Num: 2, Unit: 3, Round: 2, Note: NoteNone}),
	vlogPat(PatV1DesiredUtil, `(?:Desired|desired) GPU memory utilization (?:is )?\(([0-9]+(?:\.[0-9]+)?), `+vlogMem+`\)`,
		vlogRatio(TargetUtil, 1, 2), vlogM(TargetRequested, 2, NoteNone)),
	vlogPat(PatV1UsageWeight, `Actual usage is `+vlogMem+` for weight\b`, vlogM(TargetWeights, 1, NoteNone)),
	vlogPat(PatV1UsagePeakActivation, vlogMem+` for peak activation`, vlogM(TargetSumPeakActivation, 1, NoteNone)),
	vlogPat(PatV1UsageNonTorch, vlogMem+` for non-torch memory`, vlogM(TargetNonTorch, 1, NoteNone)),
	vlogPat(PatV1UsageConsumed, vlogMem+` for consumed memory \(weights \+ non-torch\)`, vlogM(TargetSumWeightsNonTorch, 1, NoteNone)),
	vlogPat(PatV1UsageCUDAGraph, vlogMem+` for CUDAGraph memory`, vlogM(TargetSumGraphSizing, 1, NoteNone)),
	vlogPat(PatV1SuggestRequested, "`--kv-cache-memory=(-?[0-9]+)` \\([^)]*\\) to fit into requested memory",
		Capture{Target: TargetSumSuggestRequested, Kind: KindBytes, Num: 1, Note: NoteNone}),
	vlogPat(PatV1SuggestDevice, "`--kv-cache-memory=(-?[0-9]+)` \\([^)]*\\) to fully utilize gpu memory",
		Capture{Target: TargetSumSuggestDevice, Kind: KindBytes, Num: 1, Note: NoteNone}),
	vlogPat(PatV1KVInUse, `Current kv cache memory in use is `+vlogMem, vlogM(TargetAvailableKV, 1, NoteNone)),
	// [w1], [g1]: CUDA graphs
	vlogPat(PatGraphCaptured, `Graph capturing finished in [0-9]+ secs?, took `+vlogMem, vlogM(TargetGraphActual, 1, NoteNone)),
	vlogPat(PatV1GraphPool, `CUDA graph pool memory: `+vlogMem+` \(actual\), `+vlogMem+` \(estimated\)`,
		vlogM(TargetGraphActual, 1, NoteNone), vlogM(TargetSumGraphPoolEstimate, 3, NoteNone)),
	vlogPat(PatV1GraphEstimated, `Estimated CUDA graph memory: `+vlogMem+` total`, vlogM(TargetGraphEstimate, 1, NoteNone)),
	vlogPat(PatV1GraphProfilingOn, `The current --gpu-memory-utilization=([0-9]+(?:\.[0-9]+)?) is equivalent to --gpu-memory-utilization=[0-9.]+ without CUDA graph memory profiling`,
		vlogFlag(TargetGraphApplied, true), vlogRatio(TargetUtil, 1, 4)),
	vlogPat(PatV1GraphProfilingOff, `CUDA graph memory profiling is disabled \(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0\)`,
		vlogFlag(TargetGraphApplied, false)),
	// [k1] the start-up error still says how much KV memory there was
	vlogPat(PatV1KVNeededError, `KV cache is needed, which is larger than the available KV cache memory \(`+vlogMem+`\)`,
		vlogM(TargetAvailableKV, 1, NoteNone)),
}
