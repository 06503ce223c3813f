package simengine

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Boot is a simulated vLLM start-up on simulated hardware. When it is on
// (GPUTotalBytes > 0), whether the engine boots is decided by the values
// below the way vLLM decides it — the port binds, tensor parallelism
// divides the attention heads, the device runs the dtype, the weights
// fit, the profiled KV budget is positive and holds one max_model_len
// request, the CUDA graphs fit — and the startup log is the one vLLM
// would print for that outcome (boot_log.go). Correcting the values (a
// smaller max_model_len, a higher gpu_memory_utilization, --dtype half,
// another TP, enforce_eager) really makes it boot. The zero value keeps
// the fixed legacy log of startup.go (KVCapacityTokens, FailStartup).
type Boot struct {
	GPUName           string // torch's device name, e.g. "NVIDIA L4"; default "sim-gpu"
	GPUTotalBytes     int64  // the device's total memory; > 0 turns the simulation on
	ComputeCapability string // "major.minor"; default "9.0"

	// WeightsBytes and KVBytesPerToken are the whole model's; tensor
	// parallelism shards them (KV over at most the KV-head count).
	WeightsBytes    int64 // default Config.WeightsGiB
	KVBytesPerToken int64 // K and V, all layers; default Compat.KVBytesPerToken()

	GPUMemoryUtilization float64 // default 0.9
	EnforceEager         bool    // no CUDA graphs (and no graph memory)
	CUDAGraphBytes       int64   // graph pool per rank when not eager; default 0.5 GiB
	ActivationBytes      int64   // torch peak increase while profiling; default 1.25 GiB
	NonTorchBytes        int64   // CUDA context, NCCL, allocator slack; default 0.5 GiB
	DType                string  // auto (the model's bfloat16), bfloat16, float16, half, float32, float
	Quantization         string  // "" or "fp8": vLLM's online FP8 of the 16-bit checkpoint (about half the weight bytes)
	NumAttentionHeads    int     // default 32
	TensorParallelSize   int     // default 1
	V0                   bool    // write the V0 engine's wording instead of V1's
	PID                  int     // the API server's pid in the log; default os.Getpid()
}

// Enabled reports whether the start-up is simulated from these values.
func (b Boot) Enabled() bool { return b.GPUTotalBytes > 0 }

// Boot outcomes (StartupError.Failure).
const (
	BootPortInUse       = "port_in_use"
	BootTPHeads         = "tp_not_dividing_heads"
	BootQuantCapability = "quantization_unsupported_on_device"
	BootBF16            = "bfloat16_unsupported"
	BootWeightsOOM      = "oom_weight_load"
	BootNoKVMemory      = "no_kv_cache_memory"
	BootKVTooSmall      = "kv_cache_too_small"
	BootGraphCaptureOOM = "oom_cuda_graph_capture"
)

const gibBytes = int64(1) << 30

// fp8MinCapability is Fp8Config.get_min_capability() in recent vLLM (75:
// Turing and newer run FP8 weights through Marlin; older releases said 80
// or 89).
const fp8MinCapability = 75

func (b *Boot) defaults(c *Config) error {
	setDefault(&b.GPUName, "sim-gpu")
	setDefault(&b.ComputeCapability, "9.0")
	setDefault(&b.WeightsBytes, int64(c.WeightsGiB*float64(gibBytes)))
	setDefault(&b.KVBytesPerToken, c.Compat.KVBytesPerToken())
	if b.GPUMemoryUtilization == 0 { // a negative value is refused by Validate
		b.GPUMemoryUtilization = 0.9
	}
	setDefault(&b.CUDAGraphBytes, gibBytes/2)
	setDefault(&b.ActivationBytes, gibBytes*5/4)
	setDefault(&b.NonTorchBytes, gibBytes/2)
	setDefault(&b.DType, "auto")
	setDefault(&b.NumAttentionHeads, 32)
	setDefault(&b.TensorParallelSize, 1)
	setDefault(&b.PID, os.Getpid())
	if b.V0 && versionAtLeast(c.Compat.VLLMVersion, 0, 11) {
		return fmt.Errorf("simengine: Boot.V0 with vLLM %s: the V0 engine was removed in 0.11 (pass --vllm-version 0.8.5 with --log-era v0)", c.Compat.VLLMVersion)
	}
	return b.Validate()
}

// Validate checks the values a caller sets; zero values take defaults.
func (b Boot) Validate() error {
	if b.GPUMemoryUtilization != 0 && !(b.GPUMemoryUtilization > 0 && b.GPUMemoryUtilization <= 1) {
		return fmt.Errorf("simengine: Boot.GPUMemoryUtilization must be in (0, 1], got %v (--gpu-memory-utilization)", b.GPUMemoryUtilization)
	}
	if _, _, ok := parseCC(b.ComputeCapability); !ok && b.ComputeCapability != "" {
		return fmt.Errorf("simengine: Boot.ComputeCapability %q is not major.minor, e.g. 8.9 (--compute-capability)", b.ComputeCapability)
	}
	if b.Quantization != "" && b.Quantization != "fp8" {
		return fmt.Errorf("simengine: Boot.Quantization %q: the simulation models fp8 (online) only (--quantization)", b.Quantization)
	}
	if _, ok := torchDType(b.DType); !ok && b.DType != "" {
		return fmt.Errorf("simengine: Boot.DType %q: use auto, bfloat16, float16, half, float32 or float (--dtype)", b.DType)
	}
	return nil
}

func parseCC(s string) (major, minor int, ok bool) {
	a, b, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	ma, err1 := strconv.Atoi(a)
	mi, err2 := strconv.Atoi(b)
	return ma, mi, err1 == nil && err2 == nil && ma >= 0 && mi >= 0
}

// torchDType resolves --dtype the way vLLM does for a bfloat16 checkpoint.
func torchDType(d string) (string, bool) {
	switch d {
	case "auto", "bfloat16":
		return "bfloat16", true
	case "float16", "half":
		return "float16", true
	case "float32", "float":
		return "float32", true
	}
	return "", false
}

// bootPlan is the memory arithmetic of one start-up, per rank, in bytes.
// It follows vLLM V1's accounting (gpu_worker.determine_available_memory,
// kv_cache_utils): requested = ceil(total × utilization); available KV =
// requested − weights − activation peak − non-torch − the CUDA-graph
// estimate (subtracted from v0.21 on, never in V0 or when eager).
type bootPlan struct {
	tp, blockSize   int
	dtype           string // torch dtype name without "torch."
	weights, bpt    int64  // per rank
	requested       int64
	nonKV           int64
	graph           int64 // graph pool per rank; 0 when eager
	graphEstimated  bool  // the estimate is subtracted from the KV budget
	available       int64 // may be negative
	page            int64 // bytes per KV block
	neededBlocks    int64 // blocks of one max_model_len request
	blocks          int64
	tokens          int64
	estimatedMaxLen int64 // largest max_model_len the budget holds, capped at the asked one
	maxModelLen     int
}

func planBoot(c Config) bootPlan {
	b := c.Boot
	p := bootPlan{tp: b.TensorParallelSize, blockSize: c.BlockSize, maxModelLen: c.MaxModelLen}
	p.dtype, _ = torchDType(b.DType)
	width := int64(1)
	if p.dtype == "float32" {
		width = 2 // the checkpoint is 16-bit; float32 doubles weights and KV
	}
	p.weights = b.WeightsBytes * width / int64(p.tp)
	if b.Quantization == "fp8" {
		p.weights /= 2 * width // online fp8 stores 8-bit weights whatever the compute dtype
	}
	kvShards := int64(min(p.tp, max(1, c.Compat.NumKVHeads)))
	p.bpt = b.KVBytesPerToken * width / kvShards
	p.requested = int64(math.Ceil(float64(b.GPUTotalBytes) * b.GPUMemoryUtilization))
	p.nonKV = p.weights + b.ActivationBytes + b.NonTorchBytes
	if !b.EnforceEager {
		p.graph = b.CUDAGraphBytes
		p.graphEstimated = !b.V0 && versionAtLeast(c.Compat.VLLMVersion, 0, 21)
	}
	p.available = p.requested - p.nonKV
	if p.graphEstimated {
		p.available -= p.graph
	}
	p.page = int64(p.blockSize) * p.bpt
	p.neededBlocks = int64((c.MaxModelLen + p.blockSize - 1) / p.blockSize)
	if p.available > 0 {
		p.blocks = p.available / p.page
	}
	p.tokens = p.blocks * int64(p.blockSize)
	p.estimatedMaxLen = min(p.tokens, int64(c.MaxModelLen))
	return p
}

// failure is the first check the start-up fails, in vLLM's order: the
// API server binds its socket, then validates the config; the engine core
// initialises the device, loads the weights, profiles memory, sizes the
// KV cache and captures the graphs. portErr is the bind's result.
func (p bootPlan) failure(c Config, portErr error) string {
	b := c.Boot
	major, minor, _ := parseCC(b.ComputeCapability)
	switch {
	case portErr != nil:
		return BootPortInUse
	case b.NumAttentionHeads%p.tp != 0:
		return BootTPHeads
	case b.Quantization == "fp8" && major*10+minor < fp8MinCapability:
		return BootQuantCapability
	case p.dtype == "bfloat16" && major < 8:
		return BootBF16
	case p.weights+b.NonTorchBytes > b.GPUTotalBytes:
		return BootWeightsOOM
	case p.available <= 0:
		return BootNoKVMemory
	case p.neededBlocks > p.blocks:
		return BootKVTooSmall
	case !p.graphEstimated && p.graph > p.freeAfterKV(b):
		return BootGraphCaptureOOM
	}
	return ""
}

// freeAfterKV is what the device has left once the KV cache is allocated:
// the activation peak was transient, everything else stays.
func (p bootPlan) freeAfterKV(b Boot) int64 {
	used := p.weights + b.NonTorchBytes + p.blocks*p.page
	return b.GPUTotalBytes - used
}

func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// bootListen binds the HTTP port before anything else, as vLLM's API
// server does; a port in use is a start-up failure with vLLM's OSError.
func bootListen(c Config) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
}

func addrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }

// bootStart binds the port and runs the simulated start-up; on success
// the computed KV cache size replaces cfg.KVCapacityTokens and the bound
// listener is returned for the engine to serve on.
func bootStart(cfg *Config) (net.Listener, error) {
	hl, bindErr := bootListen(*cfg)
	if bindErr != nil && !addrInUse(bindErr) {
		return nil, fmt.Errorf("simengine: listen on %s:%d: %w (pick another --port)", cfg.Host, cfg.Port, bindErr)
	}
	tokens, err := runBoot(*cfg, hl, bindErr)
	if err != nil {
		if hl != nil {
			_ = hl.Close()
		}
		return nil, err
	}
	cfg.KVCapacityTokens = tokens
	return hl, nil
}

// runBoot simulates the start-up on a bound (or failed) listener and
// writes its log. It returns the KV cache size in tokens, or a
// StartupError after writing vLLM's error and traceback.
func runBoot(c Config, hl net.Listener, bindErr error) (int, error) {
	p := planBoot(c)
	port := c.Port
	if hl != nil {
		port = hl.Addr().(*net.TCPAddr).Port
	}
	w := newBootLog(c, p, port)
	fail := p.failure(c, bindErr)
	w.write(fail)
	if fail != "" {
		return 0, &StartupError{Reason: bootReason(c, p, fail, bindErr), Failure: fail}
	}
	return int(p.tokens), nil
}

// bootReason is the one-line error the command prints after the log.
func bootReason(c Config, p bootPlan, fail string, bindErr error) string {
	b := c.Boot
	switch fail {
	case BootPortInUse:
		return fmt.Sprintf("port %d is in use: %v (pick another --port)", c.Port, bindErr)
	case BootTPHeads:
		return fmt.Sprintf("%d attention heads do not divide over --tensor-parallel-size %d", b.NumAttentionHeads, p.tp)
	case BootQuantCapability:
		return fmt.Sprintf("--quantization fp8 needs compute capability 7.5, the device has %s (drop --quantization or use another GPU)", b.ComputeCapability)
	case BootBF16:
		return fmt.Sprintf("bfloat16 needs compute capability 8.0, the device has %s (pass --dtype half)", b.ComputeCapability)
	case BootWeightsOOM:
		return fmt.Sprintf("CUDA out of memory loading %s GiB of weights per rank on a %s GiB device (raise --tensor-parallel-size or use a smaller model)", gibStr(float64(p.weights)/gib), gibStr(float64(b.GPUTotalBytes)/gib))
	case BootNoKVMemory:
		return fmt.Sprintf("no memory left for the KV cache (%s GiB; raise --gpu-memory-utilization)", gibStr(float64(p.available)/gib))
	case BootKVTooSmall:
		return fmt.Sprintf("KV cache of %d tokens cannot hold one request of max_model_len %d (lower --max-model-len or raise --gpu-memory-utilization)", p.tokens, c.MaxModelLen)
	case BootGraphCaptureOOM:
		return "CUDA out of memory capturing CUDA graphs (pass --enforce-eager or lower --gpu-memory-utilization)"
	}
	return fail
}
