package simengine

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The startup log of a simulated boot (boot.go), in vLLM's formats:
// `(<Process> pid=<N>) LEVEL MM-DD HH:MM:SS [file.py:line] message` for
// V1 (the API server, EngineCore_DP0 and, with tensor parallelism,
// Worker_TP<i> processes) and unprefixed lines for V0's main and engine
// processes ("(VllmWorkerProcess pid=<N>)" for its extra workers). A
// multi-line message repeats the header on every line, as vLLM's
// formatter does; a traceback Python prints itself carries only the
// process prefix. Wordings follow vllm-project/vllm: api_server.py,
// v1/engine/core.py, v1/worker/gpu_worker.py and gpu_model_runner.py,
// v1/core/kv_cache_utils.py (V1); worker/worker.py, worker/model_runner.py,
// executor/executor_base.py (V0); platforms/cuda.py and config/model.py
// for the dtype and tensor-parallel checks; PyTorch's CUDA caching
// allocator for the out-of-memory text.

// bproc is a process as the log names it; an empty name is unprefixed.
type bproc struct {
	name string
	pid  int
}

type bootLog struct {
	w    io.Writer
	now  func() time.Time
	c    Config
	p    bootPlan
	port int
	v0   bool

	api, core bproc
	workers   []bproc // one per TP rank; [0] is core when the executor is single-process
}

func newBootLog(c Config, p bootPlan, port int) *bootLog {
	l := &bootLog{w: c.StartupLog, now: c.Clock.Now, c: c, p: p, port: port, v0: c.Boot.V0}
	pid := c.Boot.PID
	if l.v0 {
		l.api, l.core = bproc{"", pid}, bproc{"", pid + 1}
		l.workers = []bproc{l.core}
		for i := 1; i < p.tp; i++ {
			l.workers = append(l.workers, bproc{"VllmWorkerProcess", pid + 1 + i})
		}
		return l
	}
	l.api, l.core = bproc{"APIServer", pid}, bproc{"EngineCore_DP0", pid + 1}
	if p.tp == 1 {
		l.workers = []bproc{l.core}
		return l
	}
	for i := 0; i < p.tp; i++ {
		l.workers = append(l.workers, bproc{"Worker_TP" + strconv.Itoa(i), pid + 2 + i})
	}
	return l
}

func (l *bootLog) multiproc() bool { return !l.v0 && l.p.tp > 1 }

func (pr bproc) prefix() string {
	if pr.name == "" {
		return ""
	}
	return fmt.Sprintf("(%s pid=%d) ", pr.name, pr.pid)
}

// logf writes one log record; every line of a multi-line message gets
// the header.
func (l *bootLog) logf(pr bproc, level, file string, ln int, format string, a ...any) {
	head := fmt.Sprintf("%s%s %s [%s:%d] ", pr.prefix(), level, l.now().Format("01-02 15:04:05"), file, ln)
	for _, s := range strings.Split(fmt.Sprintf(format, a...), "\n") {
		fmt.Fprintf(l.w, "%s%s\n", head, s)
	}
}

func (l *bootLog) info(pr bproc, file string, ln int, format string, a ...any) {
	l.logf(pr, "INFO", file, ln, format, a...)
}

func (l *bootLog) raw(pr bproc, s string) { fmt.Fprintf(l.w, "%s%s\n", pr.prefix(), s) }

// tracebackText is Python's rendering of an uncaught exception.
func tracebackText(fs []frame, exc string) string {
	var sb strings.Builder
	sb.WriteString("Traceback (most recent call last):\n")
	for _, f := range fs {
		fmt.Fprintf(&sb, "  File \"%s\", line %d, in %s\n", f.path(), f.line, f.fn)
		if f.src != "" {
			fmt.Fprintf(&sb, "    %s\n", f.src)
		}
	}
	sb.WriteString(exc)
	return sb.String()
}

// exception is logger.exception(msg): the message, then the traceback,
// all under ERROR headers.
func (l *bootLog) exception(pr bproc, file string, ln int, msg string, fs []frame, exc string) {
	l.logf(pr, "ERROR", file, ln, "%s\n%s", msg, tracebackText(fs, exc))
}

// traceback is an exception Python prints on its own (process prefix only).
func (l *bootLog) traceback(pr bproc, fs []frame, exc string) {
	for _, s := range strings.Split(tracebackText(fs, exc), "\n") {
		l.raw(pr, s)
	}
}

// write writes the log of a start-up that fails with fail ("" boots).
func (l *bootLog) write(fail string) {
	l.apiHeader()
	if fail == BootPortInUse {
		l.traceback(l.api, portFrames(l.v0), "OSError: [Errno 98] Address already in use")
		return
	}
	if l.v0 {
		l.info(l.api, "config.py", 3525, "This model supports multiple tasks: {'generate', 'embed', 'classify', 'reward', 'score'}. Defaulting to 'generate'.")
	} else {
		l.info(l.api, "model.py", 1510, "Using max model len %d", l.c.MaxModelLen)
	}
	if fail == BootTPHeads {
		l.traceback(l.api, tpFrames(l.v0), fmt.Sprintf("ValueError: Total number of attention heads (%d) must be divisible by tensor parallel size (%d).", l.c.Boot.NumAttentionHeads, l.p.tp))
		return
	}
	if fail == BootQuantCapability {
		major, minor, _ := parseCC(l.c.Boot.ComputeCapability)
		l.traceback(l.api, quantFrames(l.v0), fmt.Sprintf("ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: %d. Current capability: %d.", fp8MinCapability, major*10+minor))
		return
	}
	l.engineHeader()
	if fail == BootBF16 {
		l.workerFailure("init_device", initDeviceFrames(l.v0), l.bf16Error())
		return
	}
	l.loadLines()
	if fail == BootWeightsOOM {
		l.workerFailure("load_model", loadFrames(l.v0), "torch.OutOfMemoryError: "+l.weightsOOMText())
		return
	}
	l.profileLines()
	if l.v0 {
		l.v0Blocks()
	}
	switch fail {
	case BootNoKVMemory:
		l.kvFailure(l.noKVText())
		return
	case BootKVTooSmall:
		l.kvFailure(l.kvTooSmallText())
		return
	}
	if !l.v0 {
		l.info(l.core, "kv_cache_utils.py", 1087, "GPU KV cache size: %s tokens", thousands(int(l.p.tokens)))
		l.info(l.core, "kv_cache_utils.py", 1091, "Maximum concurrency for %s tokens per request: %.2fx", thousands(l.c.MaxModelLen), float64(l.p.blocks)/float64(l.p.neededBlocks))
	}
	if fail == BootGraphCaptureOOM {
		l.graphFailure()
		return
	}
	l.graphLines()
	l.ready()
}

func (l *bootLog) apiHeader() {
	b := l.c.Boot
	if l.v0 {
		l.info(l.api, "api_server.py", 1043, "vLLM API server version %s", l.c.Compat.VLLMVersion)
		l.info(l.api, "api_server.py", 1044, "args: Namespace(host=%s, port=%d, model=%s, dtype=%s, max_model_len=%d, tensor_parallel_size=%d, gpu_memory_utilization=%s, enforce_eager=%s)",
			pyRepr(l.c.Host), l.argPort(), pyRepr(l.c.Model), pyRepr(b.DType), l.c.MaxModelLen, l.p.tp, pyFloat(b.GPUMemoryUtilization), pyBool(b.EnforceEager))
		return
	}
	l.info(l.api, "api_server.py", 1885, "vLLM API server version %s", l.c.Compat.VLLMVersion)
	var args []string
	add := func(k, v string) { args = append(args, pyRepr(k)+": "+v) }
	add("model_tag", pyRepr(l.c.Model))
	if l.argPort() != 8000 {
		add("port", strconv.Itoa(l.argPort()))
	}
	add("model", pyRepr(l.c.Model))
	if b.DType != "auto" {
		add("dtype", pyRepr(b.DType))
	}
	add("max_model_len", strconv.Itoa(l.c.MaxModelLen))
	if l.p.tp != 1 {
		add("tensor_parallel_size", strconv.Itoa(l.p.tp))
	}
	if b.GPUMemoryUtilization != 0.9 {
		add("gpu_memory_utilization", pyFloat(b.GPUMemoryUtilization))
	}
	if b.EnforceEager {
		add("enforce_eager", "True")
	}
	if b.Quantization != "" {
		add("quantization", pyRepr(b.Quantization))
	}
	add("kv_transfer_config", fmt.Sprintf("{'kv_connector': 'NixlConnector', 'kv_role': 'kv_both', 'engine_id': %s}", pyRepr(l.c.EngineID)))
	l.info(l.api, "utils.py", 233, "non-default args: {%s}", strings.Join(args, ", "))
}

// argPort is the --port vLLM was given: the configured one, or the one
// picked for port 0 (vLLM itself has no "any port").
func (l *bootLog) argPort() int {
	if l.c.Port == 0 {
		return l.port
	}
	return l.c.Port
}

func (l *bootLog) engineHeader() {
	era, file, ln := "V1", "core.py", 77
	if l.v0 {
		era, file, ln = "V0", "llm_engine.py", 243
	}
	l.info(l.core, file, ln, "Initializing a %s LLM engine (v%s) with config: model=%s, speculative_config=None, tokenizer=%s, skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.%s, max_seq_len=%d, download_dir=None, load_format=auto, tensor_parallel_size=%d, pipeline_parallel_size=1, disable_custom_all_reduce=False, quantization=%s, enforce_eager=%s, kv_cache_dtype=%s, device_config=cuda, seed=0, served_model_name=%s",
		era, l.c.Compat.VLLMVersion, pyRepr(l.c.Model), pyRepr(l.c.Model), l.p.dtype, l.c.MaxModelLen, l.p.tp, quantRepr(l.c.Boot.Quantization), pyBool(l.c.Boot.EnforceEager), l.c.Compat.CacheDType, l.c.Model)
	for i, w := range l.workers {
		if l.v0 {
			if l.p.tp > 1 {
				l.logf(w, "DEBUG", "parallel_state.py", 959, "world_size=%d rank=%d local_rank=%d distributed_init_method=tcp://127.0.0.1:29500 backend=nccl", l.p.tp, i, i)
			}
			continue
		}
		l.info(w, "parallel_state.py", 1325, "rank %d in world size %d is assigned as DP rank 0, PP rank 0, TP rank %d, EP rank %d", i, l.p.tp, i, i)
	}
}

// perRank seconds that grow with the bytes each rank loads, so the log
// is deterministic and plausible.
func (l *bootLog) loadSeconds() float64 { return 0.28 * float64(l.p.weights) / gib }

func (l *bootLog) loadLines() {
	for _, w := range l.workers {
		if l.v0 {
			l.info(w, "model_runner.py", 1110, "Starting to load model %s...", l.c.Model)
			l.info(w, "loader.py", 447, "Loading weights took %.2f seconds", l.loadSeconds()*0.95)
			l.info(w, "model_runner.py", 1115, "Model loading took %.4f GiB and %.6f seconds", float64(l.p.weights)/gib, l.loadSeconds())
			continue
		}
		l.info(w, "gpu_model_runner.py", 2338, "Starting to load model %s...", l.c.Model)
		l.info(w, "cuda.py", 403, "Using %s backend.", l.c.Compat.AttnBackend)
		l.info(w, "default_loader.py", 268, "Loading weights took %.2f seconds", l.loadSeconds()*0.95)
		l.info(w, "gpu_model_runner.py", 2602, "Model loading took %s GiB memory and %.6f seconds", gibStr(float64(l.p.weights)/gib), l.loadSeconds())
	}
}

func (l *bootLog) profileLines() {
	b, p := l.c.Boot, l.p
	g := func(x int64) float64 { return float64(x) / gib }
	if !l.v0 && !b.EnforceEager {
		l.info(l.workers[0], "monitor.py", 53, "torch.compile took %.2f s in total", 9.0+g(p.weights)*0.2)
	}
	for _, w := range l.workers {
		if l.v0 {
			l.info(w, "worker.py", 267, "Memory profiling takes %.2f seconds\nthe current vLLM instance can use total_gpu_memory (%.2fGiB) x gpu_memory_utilization (%.2f) = %.2fGiB\nmodel weights take %.2fGiB; non_torch_memory takes %.2fGiB; PyTorch activation peak memory takes %.2fGiB; the rest of the memory reserved for KV Cache is %.2fGiB.",
				1.5, g(b.GPUTotalBytes), b.GPUMemoryUtilization, g(p.requested), g(p.weights), g(b.NonTorchBytes), g(b.ActivationBytes), g(p.available))
			continue
		}
		if p.graphEstimated {
			l.info(w, "gpu_model_runner.py", 4862, "Estimated CUDA graph memory: %.2f GiB total", g(p.graph))
		}
		l.logf(w, "DEBUG", "gpu_worker.py", 285, "Memory profiling takes %.2f seconds. Total non KV cache memory: %sGiB; torch peak memory increase: %sGiB; non-torch forward increase memory: %sGiB; weights memory: %sGiB.",
			1.5, gibStr(g(p.nonKV)), gibStr(g(b.ActivationBytes)), gibStr(g(b.NonTorchBytes)), gibStr(g(p.weights)))
		l.info(w, "gpu_worker.py", 298, "Available KV cache memory: %s GiB", gibStr(g(p.available)))
		if p.graphEstimated {
			d := float64(p.graph) / float64(b.GPUTotalBytes)
			l.info(w, "gpu_worker.py", 313, "CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=%.4f is equivalent to --gpu-memory-utilization=%.4f without CUDA graph memory profiling. To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to %.4f. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
				b.GPUMemoryUtilization, b.GPUMemoryUtilization-d, b.GPUMemoryUtilization+d)
		}
	}
}

// v0Blocks is V0's executor summary, printed before the cache check.
func (l *bootLog) v0Blocks() {
	l.info(l.core, "executor_base.py", 111, "# cuda blocks: %d, # CPU blocks: %d", l.p.blocks, 2048)
	l.info(l.core, "executor_base.py", 116, "Maximum concurrency for %d tokens per request: %.2fx", l.c.MaxModelLen, float64(l.p.tokens)/float64(l.c.MaxModelLen))
}

func (l *bootLog) graphLines() {
	b, p := l.c.Boot, l.p
	if b.EnforceEager {
		return
	}
	g := float64(p.graph) / gib
	for _, w := range l.workers {
		if l.v0 {
			l.info(w, "model_runner.py", 1562, "Graph capturing finished in %.0f secs, took %.2f GiB", 6.0, g)
			continue
		}
		l.info(w, "gpu_model_runner.py", 3480, "Graph capturing finished in %.0f secs, took %.2f GiB", 6.0, g)
		if p.graphEstimated {
			l.info(w, "gpu_worker.py", 421, "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), difference: %s GiB (%.1f%%).", gibStr(g), gibStr(g), gibStr(0), 0.0)
		}
	}
}

func (l *bootLog) ready() {
	if l.v0 {
		l.info(l.core, "llm_engine.py", 436, "init engine (profile, create kv cache, warmup model) took %.2f seconds", 12.34)
		l.info(l.api, "api_server.py", 1081, "Starting vLLM API server on http://%s:%d", l.c.Host, l.port)
	} else {
		l.info(l.core, "core.py", 211, "init engine (profile, create kv cache, warmup model) took %.2f s", 12.34)
		l.info(l.api, "api_server.py", 1971, "Starting vLLM API server 0 on http://%s:%d", l.c.Host, l.port)
	}
	l.raw(l.api, fmt.Sprintf("INFO:     Started server process [%d]", l.api.pid))
	l.raw(l.api, "INFO:     Waiting for application startup.")
	l.raw(l.api, "INFO:     Application startup complete.")
}

// ---- failures ----

// workerFailure: a worker-side stage (device, weights) raised exc.
func (l *bootLog) workerFailure(method string, stage []frame, exc string) {
	if !l.multiproc() {
		fs := cat(coreFrames(l.v0, false), executorFrames(l.v0, method), stage)
		l.engineFailure(fs, exc)
		return
	}
	for i, w := range l.workers {
		l.exception(w, "multiproc_executor.py", 589, "WorkerProc failed to start.", cat(workerMainFrames(method), stage), onGPU(exc, i))
	}
	l.engineFailure(cat(coreFrames(false, false), v1WorkerWaitFrames),
		"Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.")
}

// kvFailure: the engine's KV check raised a ValueError.
func (l *bootLog) kvFailure(msg string) {
	l.engineFailure(cat(coreFrames(l.v0, true), kvCheckFrames(l.v0)), "ValueError: "+msg)
}

func (l *bootLog) graphFailure() {
	exc := "torch.OutOfMemoryError: " + l.graphOOMText()
	if l.v0 {
		l.engineFailure(cat(coreFrames(true, true)[:len(coreFrames(true, true))-1], graphFrames(true)), exc)
		return
	}
	if !l.multiproc() {
		l.engineFailure(cat(v1GraphCoreFrames(false), graphFrames(false)), exc)
		return
	}
	for i, w := range l.workers {
		l.exception(w, "multiproc_executor.py", 657, "WorkerProc hit an exception.", cat([]frame{
			fr("vllm/v1/executor/multiproc_executor.py", 652, "worker_busy_loop", "output = func(*args, **kwargs)"),
		}, graphFrames(false)), onGPU(exc, i))
	}
	l.engineFailure(v1GraphCoreFrames(true), "RuntimeError: Worker failed with error '"+l.graphOOMText()+"', please check the stack trace above for the root cause")
}

// engineFailure is how the engine process dies: its logged exception,
// the traceback multiprocessing prints, and the API server's wrapper.
func (l *bootLog) engineFailure(fs []frame, exc string) {
	if l.v0 {
		msg := exc[strings.Index(exc, ": ")+2:]
		l.exception(l.core, "engine.py", 448, msg, fs, exc)
		l.raw(l.core, "Process SpawnProcess-1:")
		l.traceback(l.core, cat(bootstrapFrames(true), fs), exc)
		l.traceback(l.api, wrapperFrames(true), "RuntimeError: Engine process failed to start. See stack trace for the root cause.")
		return
	}
	l.exception(l.core, "core.py", 708, "EngineCore failed to start.", fs, exc)
	l.raw(l.core, "Process EngineCore_DP0:")
	l.traceback(l.core, cat(bootstrapFrames(false), fs), exc)
	l.traceback(l.api, wrapperFrames(false), "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
}

func (l *bootLog) bf16Error() string {
	if l.v0 {
		// V0 releases lack the space before the backquote.
		return fmt.Sprintf("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your %s GPU has compute capability %s. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: --dtype=half.", l.c.Boot.GPUName, l.c.Boot.ComputeCapability)
	}
	return fmt.Sprintf("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your %s GPU has compute capability %s. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.", l.c.Boot.GPUName, l.c.Boot.ComputeCapability)
}

func (l *bootLog) kvTooSmallText() string {
	if l.v0 {
		return fmt.Sprintf("The model's max seq len (%d) is larger than the maximum number of tokens that can be stored in KV cache (%d). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", l.c.MaxModelLen, l.p.tokens)
	}
	need := float64(l.p.neededBlocks*l.p.page) / gib
	est := ""
	if l.p.estimatedMaxLen > 0 {
		est = fmt.Sprintf("Based on the available memory, the estimated maximum model length is %d. ", l.p.estimatedMaxLen)
	}
	return fmt.Sprintf("To serve at least one request with the model's max seq len (%d), (%s GiB KV cache is needed, which is larger than the available KV cache memory (%s GiB). %sTry increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
		l.c.MaxModelLen, gibStr(need), gibStr(float64(l.p.available)/gib), est)
}

func (l *bootLog) noKVText() string {
	if l.v0 {
		return "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
	}
	return "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
}

// weightsOOMText is PyTorch's allocator message at the layer allocation
// that no longer fits: weights are allocated in per-layer chunks until
// the next one does not.
func (l *bootLog) weightsOOMText() string {
	b, p := l.c.Boot, l.p
	layers := int64(max(1, l.c.Compat.NumHiddenLayers))
	chunk := roundUp(max(p.weights/(layers*3), 1), 2<<20)
	slack := int64(20 << 20)
	usable := b.GPUTotalBytes - b.NonTorchBytes - slack
	allocated := max(usable, 0) / chunk * chunk
	free := max(b.GPUTotalBytes-b.NonTorchBytes-slack-allocated, 0)
	return cudaOOM(chunk, b.GPUTotalBytes, free, allocated, slack)
}

func (l *bootLog) graphOOMText() string {
	b, p := l.c.Boot, l.p
	free := max(p.freeAfterKV(b), 0)
	slack := int64(20 << 20)
	allocated := b.GPUTotalBytes - free - slack - b.NonTorchBytes
	return cudaOOM(roundUp(p.graph, 2<<20), b.GPUTotalBytes, free, allocated, slack)
}

func cudaOOM(tried, total, free, allocated, reserved int64) string {
	return fmt.Sprintf("CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of %s of which %s is free. Including non-PyTorch memory, this process has %s memory in use. Of the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
		torchSize(tried), torchSize(total), torchSize(free), torchSize(total-free), torchSize(allocated), torchSize(reserved))
}

// onGPU names rank i's device in an allocator message (each worker owns
// one GPU; the text is written for GPU 0).
func onGPU(exc string, i int) string {
	return strings.Replace(exc, "GPU 0 has a total capacity", fmt.Sprintf("GPU %d has a total capacity", i), 1)
}

func roundUp(x, m int64) int64 { return (x + m - 1) / m * m }

// torchSize is c10's format_size: bytes, KiB, MiB or GiB with two decimals.
func torchSize(b int64) string {
	switch {
	case b <= 1024:
		return fmt.Sprintf("%d bytes", b)
	case b <= 1<<20:
		return fmt.Sprintf("%.2f KiB", float64(b)/(1<<10))
	case b <= 1<<30:
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
}

// pyRepr is Python's repr of a str.
func pyRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	return pyQuote(s, q, func(r rune) string {
		switch {
		case string(r) == q:
			return `\` + q
		case r < 0x20 || r == 0x7f:
			return fmt.Sprintf(`\x%02x`, r)
		}
		return ""
	})
}

// pyEscapes are the escapes repr and json.dumps both write.
var pyEscapes = map[rune]string{'\\': `\\`, '\n': `\n`, '\r': `\r`, '\t': `\t`}

// pyQuote writes s between q marks, escaping the runes of pyEscapes and
// those esc names (esc returns "" to keep a rune as it is).
func pyQuote(s, q string, esc func(rune) string) string {
	var sb strings.Builder
	sb.WriteString(q)
	for _, r := range s {
		e, ok := pyEscapes[r]
		if !ok {
			e = esc(r)
		}
		if e == "" {
			sb.WriteRune(r)
			continue
		}
		sb.WriteString(e)
	}
	sb.WriteString(q)
	return sb.String()
}

func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

func quantRepr(q string) string {
	if q == "" {
		return "None"
	}
	return q
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
