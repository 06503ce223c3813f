package simengine

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// StartupError is an engine that refused to start, the way vLLM does after
// logging the root cause.
type StartupError struct {
	Reason  string
	Failure string // a Boot* outcome when the start-up was simulated (Config.Boot), else ""
}

func (e *StartupError) Error() string { return "simengine: engine startup failed: " + e.Reason }

const gib = float64(1 << 30)

// startupLog writes the lines vLLM prints while it sizes memory, derived
// from the configuration, and fails the way vLLM fails when asked to.
func startupLog(c Config) error {
	w := &vlog{w: c.StartupLog, now: c.Clock.Now, pid: os.Getpid()}
	bpt := c.Compat.KVBytesPerToken()
	kvGiB := float64(int64(c.KVCapacityTokens)*bpt) / gib
	w.info("APIServer", "api_server.py", 1885, "vLLM API server version %s", c.Compat.VLLMVersion)
	w.info("APIServer", "utils.py", 233, "non-default args: {'model': '%s', 'max_model_len': %d, 'kv_transfer_config': {'kv_connector': 'NixlConnector', 'kv_role': 'kv_both', 'engine_id': '%s'}}", c.Model, c.MaxModelLen, c.EngineID)
	w.info("EngineCore_DP0", "cuda.py", 403, "Using %s backend.", c.Compat.AttnBackend)
	if c.FailStartup == "cuda-oom" {
		w.err("EngineCore_DP0", "core.py", 708, "EngineCore failed to start.")
		fmt.Fprintf(c.StartupLog, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 GiB memory in use. Of the allocated memory 76.51 GiB is allocated by PyTorch, and 1.12 GiB is reserved by PyTorch but unallocated.\n")
		fmt.Fprintf(c.StartupLog, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
		return &StartupError{Reason: "CUDA out of memory while loading the model"}
	}
	w.info("EngineCore_DP0", "gpu_model_runner.py", 2602, "Model loading took %s GiB memory and %.6f seconds", gibStr(c.WeightsGiB), 4.2)
	w.info("EngineCore_DP0", "gpu_worker.py", 298, "Available KV cache memory: %s GiB", gibStr(kvGiB))
	if c.FailStartup == "kv-cache-too-small" || c.KVCapacityTokens < c.MaxModelLen {
		need := float64(int64(c.MaxModelLen)*bpt) / gib
		msg := fmt.Sprintf("To serve at least one request with the model's max seq len (%d), (%s GiB KV cache is needed, which is larger than the available KV cache memory (%s GiB). Based on the available memory, the estimated maximum model length is %d. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
			c.MaxModelLen, gibStr(need), gibStr(kvGiB), c.KVCapacityTokens)
		w.err("EngineCore_DP0", "core.py", 708, "EngineCore failed to start.")
		fmt.Fprintf(c.StartupLog, "ValueError: %s\n", msg)
		fmt.Fprintf(c.StartupLog, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
		return &StartupError{Reason: fmt.Sprintf("KV cache of %d tokens cannot hold one request of max_model_len %d (raise --kv-capacity-tokens or lower --max-model-len)", c.KVCapacityTokens, c.MaxModelLen)}
	}
	w.info("EngineCore_DP0", "kv_cache_utils.py", 1087, "GPU KV cache size: %s tokens", thousands(c.KVCapacityTokens))
	w.info("EngineCore_DP0", "kv_cache_utils.py", 1091, "Maximum concurrency for %s tokens per request: %.2fx", thousands(c.MaxModelLen), float64(c.KVCapacityTokens)/float64(c.MaxModelLen))
	w.info("EngineCore_DP0", "core.py", 211, "init engine (profile, create kv cache, warmup model) took %.2f s", 12.34)
	return nil
}

// vlog writes vLLM's log format: "LEVEL MM-DD HH:MM:SS [file:line] msg",
// prefixed with the process tag.
type vlog struct {
	w   io.Writer
	now func() time.Time
	pid int
}

func (v *vlog) line(level, proc, file string, ln int, format string, a ...any) {
	fmt.Fprintf(v.w, "(%s pid=%d) %s %s [%s:%d] %s\n", proc, v.pid, level, v.now().Format("01-02 15:04:05"), file, ln, fmt.Sprintf(format, a...))
}

func (v *vlog) info(proc, file string, ln int, format string, a ...any) {
	v.line("INFO", proc, file, ln, format, a...)
}

func (v *vlog) err(proc, file string, ln int, format string, a ...any) {
	v.line("ERROR", proc, file, ln, format, a...)
}

// gibStr is vLLM's format_gib: round to two decimals, Python float repr.
func gibStr(g float64) string {
	r := math.Round(g*100) / 100
	s := strconv.FormatFloat(r, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
