package simengine

import (
	"bytes"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/ports"
)

const (
	l4Bytes   = int64(24) << 30
	h100Bytes = int64(85018877624) // what vLLM reports for an H100 80GB HBM3
	t4Bytes   = int64(16) << 30
)

func gibOf(g float64) int64 { return int64(g * float64(int64(1)<<30)) }

// bootCfg is an 8B-like model (14.99 GiB, 128 KiB of KV per token) on an
// L4 with vLLM's defaults, a fixed clock and fixed pids.
func bootCfg(log *bytes.Buffer, mod func(*Config)) Config {
	c := Config{Model: "meta-llama/Llama-3.1-8B-Instruct", Profile: fastProfile(), MaxModelLen: 131072, StartupLog: log,
		EngineID: "eng-0", Clock: ports.NewFake(time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)),
		Boot: Boot{GPUName: "NVIDIA L4", GPUTotalBytes: l4Bytes, ComputeCapability: "8.9", WeightsBytes: gibOf(14.99), PID: 4242}}
	if mod != nil {
		mod(&c)
	}
	return c
}

// bootRun starts the engine; a booted engine is closed at cleanup.
func bootRun(t *testing.T, c Config) (*Engine, *StartupError) {
	t.Helper()
	e, err := Start(c)
	var se *StartupError
	if errors.As(err, &se) {
		if e != nil {
			t.Fatal("a failed start returned an engine")
		}
		return nil, se
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e, nil
}

func wantLines(t *testing.T, log string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", log)
	}
}

func kvTokens(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.model.Stats().TotalBlocks * e.cfg.BlockSize
}

// The KV budget is computed, the error is vLLM's, and the length vLLM
// estimates really boots; raising gpu_memory_utilization alone cannot
// hold 131072 tokens on this card.
func TestBootKVTooSmallThenCorrected(t *testing.T) {
	var log bytes.Buffer
	_, se := bootRun(t, bootCfg(&log, nil))
	if se == nil || se.Failure != BootKVTooSmall {
		t.Fatalf("failure %+v, want %s", se, BootKVTooSmall)
	}
	wantLines(t, log.String(),
		"(APIServer pid=4242) INFO 09-10 12:00:00 [api_server.py:1885] vLLM API server version 0.21.0",
		"(EngineCore_DP0 pid=4243) INFO 09-10 12:00:00 [gpu_model_runner.py:2602] Model loading took 14.99 GiB memory and ",
		"[gpu_worker.py:285] Memory profiling takes 1.50 seconds. Total non KV cache memory: 16.74GiB; torch peak memory increase: 1.25GiB; non-torch forward increase memory: 0.5GiB; weights memory: 14.99GiB.",
		"[gpu_worker.py:298] Available KV cache memory: 4.36 GiB",
		"(EngineCore_DP0 pid=4243) ERROR 09-10 12:00:00 [core.py:708] EngineCore failed to start.",
		`File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 694, in _check_enough_kv_cache_memory`,
		"ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, which is larger than the available KV cache memory (4.36 GiB). Based on the available memory, the estimated maximum model length is 35712. Try increasing `gpu_memory_utilization`",
		"(APIServer pid=4242) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
	if strings.Contains(log.String(), "GPU KV cache size") {
		t.Error("a failed boot logged a KV cache size")
	}

	log.Reset()
	_, se = bootRun(t, bootCfg(&log, func(c *Config) { c.Boot.GPUMemoryUtilization = 1 }))
	if se == nil || se.Failure != BootKVTooSmall || !strings.Contains(log.String(), "the estimated maximum model length is 55376.") {
		t.Fatalf("utilization 1.0: %+v\n%s", se, log.String())
	}

	log.Reset()
	e, se := bootRun(t, bootCfg(&log, func(c *Config) { c.MaxModelLen = 35712 }))
	if se != nil {
		t.Fatalf("corrected max_model_len: %v\n%s", se, log.String())
	}
	wantLines(t, log.String(), "[kv_cache_utils.py:1087] GPU KV cache size: 35,712 tokens",
		"Maximum concurrency for 35,712 tokens per request: 1.00x", "Graph capturing finished in 6 secs, took 0.50 GiB",
		"Starting vLLM API server 0 on http://127.0.0.1:", "INFO:     Application startup complete.")
	if got := kvTokens(e); got != 35712 {
		t.Errorf("engine KV capacity %d tokens, want the computed 35712", got)
	}
}

func TestBootFailures(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	cases := []struct {
		name  string
		mod   func(*Config)
		fail  string
		wants []string
		fix   func(*Config)
	}{
		{"tp does not divide heads", func(c *Config) { c.MaxModelLen = 4096; c.Boot.TensorParallelSize = 3 }, BootTPHeads, []string{
			`vllm/config/model.py", line 1414, in verify_with_parallel_config`,
			"(APIServer pid=4242) ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3).",
		}, func(c *Config) { c.Boot.TensorParallelSize = 2 }},
		{"bfloat16 on a T4", func(c *Config) {
			c.MaxModelLen = 4096
			c.Boot.GPUName, c.Boot.GPUTotalBytes, c.Boot.ComputeCapability, c.Boot.WeightsBytes = "Tesla T4", t4Bytes, "7.5", gibOf(2.3)
		}, BootBF16, []string{
			`vllm/platforms/cuda.py", line 517, in check_if_supports_dtype`,
			"ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
			"RuntimeError: Engine core initialization failed.",
		}, func(c *Config) { c.Boot.DType = "half" }},
		{"weights do not fit", func(c *Config) { c.MaxModelLen = 4096; c.Boot.WeightsBytes = gibOf(26) }, BootWeightsOOM, []string{
			`vllm/model_executor/layers/linear.py", line 192, in create_weights`,
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 278.00 MiB. GPU 0 has a total capacity of 24.00 GiB of which ",
			"RuntimeError: Engine core initialization failed.",
		}, func(c *Config) { c.Boot.TensorParallelSize = 2 }},
		{"no memory for cache blocks", func(c *Config) { c.MaxModelLen = 4096; c.Boot.GPUMemoryUtilization = 0.7 }, BootNoKVMemory, []string{
			"Available KV cache memory: -0.44 GiB",
			"ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name).",
		}, func(c *Config) { c.Boot.GPUMemoryUtilization = 0.9 }},
		{"graph capture out of memory", func(c *Config) {
			c.MaxModelLen = 4096
			c.Compat = DefaultCompat(c.Model)
			c.Compat.VLLMVersion = "0.11.0" // before the graph estimate was reserved
			c.Boot.GPUMemoryUtilization, c.Boot.CUDAGraphBytes = 0.98, gibOf(2)
		}, BootGraphCaptureOOM, []string{
			`vllm/compilation/cuda_graph.py", line 178, in __call__`,
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
		}, func(c *Config) { c.Boot.EnforceEager = true }},
		{"quantization the device cannot run", func(c *Config) {
			c.MaxModelLen = 4096
			c.Boot.GPUName, c.Boot.GPUTotalBytes, c.Boot.ComputeCapability, c.Boot.DType, c.Boot.Quantization = "Tesla V100-SXM2-32GB", 32<<30, "7.0", "half", "fp8"
		}, BootQuantCapability, []string{
			`vllm/config/vllm.py", line 836, in _get_quantization_config`,
			"(APIServer pid=4242) ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 75. Current capability: 70.",
		}, func(c *Config) { c.Boot.Quantization = "" }},
		{"online fp8 fits weights the 16-bit checkpoint does not", func(c *Config) {
			c.MaxModelLen = 4096
			c.Boot.GPUTotalBytes, c.Boot.WeightsBytes = h100Bytes, gibOf(131.4) // a 70B model on one H100
		}, BootWeightsOOM, []string{"torch.OutOfMemoryError: CUDA out of memory."}, func(c *Config) { c.Boot.Quantization = "fp8" }},
		{"port in use", func(c *Config) { c.MaxModelLen = 4096; c.Port = busyPort }, BootPortInUse, []string{
			`vllm/entrypoints/openai/api_server.py", line 1821, in create_server_socket`,
			"(APIServer pid=4242) OSError: [Errno 98] Address already in use",
		}, func(c *Config) { c.Port = 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			_, se := bootRun(t, bootCfg(&log, tc.mod))
			if se == nil || se.Failure != tc.fail {
				t.Fatalf("failure %+v, want %s\n%s", se, tc.fail, log.String())
			}
			wantLines(t, log.String(), tc.wants...)
			log.Reset()
			_, se = bootRun(t, bootCfg(&log, func(c *Config) { tc.mod(c); tc.fix(c) }))
			if se != nil {
				t.Fatalf("corrected values did not boot: %v\n%s", se, log.String())
			}
			wantLines(t, log.String(), "GPU KV cache size: ", "Application startup complete.")
		})
	}
}

// Tensor parallelism shards weights and KV over Worker_TP processes, each
// logging its own memory lines.
func TestBootTensorParallelWorkers(t *testing.T) {
	var log bytes.Buffer
	e, se := bootRun(t, bootCfg(&log, func(c *Config) { c.MaxModelLen = 8192; c.Boot.TensorParallelSize = 2; c.Boot.WeightsBytes = gibOf(26) }))
	if se != nil {
		t.Fatalf("%v\n%s", se, log.String())
	}
	// per rank: 13 GiB of weights, 64 KiB of KV per token
	wantLines(t, log.String(),
		"(Worker_TP0 pid=4244) INFO 09-10 12:00:00 [parallel_state.py:1325] rank 0 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
		"(Worker_TP1 pid=4245) INFO 09-10 12:00:00 [gpu_model_runner.py:2602] Model loading took 13.0 GiB memory",
		"(Worker_TP1 pid=4245) INFO 09-10 12:00:00 [gpu_worker.py:298] Available KV cache memory: 6.35 GiB",
		"(EngineCore_DP0 pid=4243) INFO 09-10 12:00:00 [kv_cache_utils.py:1087] GPU KV cache size: 104,032 tokens",
		"'tensor_parallel_size': 2")
	if got := kvTokens(e); got != 104032 {
		t.Errorf("KV capacity %d", got)
	}
	sl, err := memory.ParseVLLMLog(strings.NewReader(log.String()), memory.VLLMLogOptions{GPUTotalBytes: ptr(l4Bytes)})
	if err != nil {
		t.Fatal(err)
	}
	if len(sl.Observations) != 2 || *sl.Observations[1].TPRank != 1 || *sl.Observations[1].ModelWeightBytes != gibOf(13) {
		t.Fatalf("observations %+v", sl.Observations)
	}

	// every rank runs out of memory on its own device
	log.Reset()
	_, se = bootRun(t, bootCfg(&log, func(c *Config) { c.MaxModelLen = 8192; c.Boot.TensorParallelSize = 2; c.Boot.WeightsBytes = gibOf(60) }))
	if se == nil || se.Failure != BootWeightsOOM {
		t.Fatalf("failure %+v", se)
	}
	wantLines(t, log.String(),
		"(Worker_TP0 pid=4244) ERROR 09-10 12:00:00 [multiproc_executor.py:589] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 320.00 MiB. GPU 0 has",
		"(Worker_TP1 pid=4245) ERROR 09-10 12:00:00 [multiproc_executor.py:589] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 320.00 MiB. GPU 1 has",
		"(EngineCore_DP0 pid=4243) ERROR 09-10 12:00:00 [core.py:708] Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.")
}

func ptr[T any](v T) *T { return &v }

// narwhal's own vLLM log parser reads the simulated successful boot.
func TestBootLogParsesAsObservation(t *testing.T) {
	var log bytes.Buffer
	bootRun(t, bootCfg(&log, func(c *Config) {
		c.MaxModelLen = 8192
		c.Boot.GPUName, c.Boot.GPUTotalBytes, c.Boot.ComputeCapability = "NVIDIA H100 80GB HBM3", h100Bytes, "9.0"
	}))
	sl, err := memory.ParseVLLMLog(strings.NewReader(log.String()), memory.VLLMLogOptions{GPUTotalBytes: ptr(h100Bytes)})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(sl.Observations) != 1 || len(sl.Rejected) != 0 {
		t.Fatalf("observations %d, rejected %+v", len(sl.Observations), sl.Rejected)
	}
	o := sl.Observations[0]
	checks := []struct {
		name      string
		got       *int64
		want, tol int64
	}{
		{"weights", o.ModelWeightBytes, gibOf(14.99), gibOf(0.005)},
		{"available kv", o.AvailableKVBytes, 58005680817, gibOf(0.005)},
		{"kv tokens", o.KVCacheSizeTokens, 442544, 0},
		{"graph estimate", o.CUDAGraphEstimateBytes, gibOf(0.5), gibOf(0.005)},
		{"graph actual", o.CUDAGraphActualBytes, gibOf(0.5), gibOf(0.005)},
		{"torch peak", o.TransientPeakBytes, gibOf(1.25), gibOf(0.005)},
		{"max concurrency tokens", o.MaxConcurrencyTokens, 8192, 0},
	}
	for _, c := range checks {
		if c.got == nil || *c.got < c.want-c.tol || *c.got > c.want+c.tol {
			t.Errorf("%s = %v, want %d ± %d", c.name, c.got, c.want, c.tol)
		}
	}
	if o.MaxConcurrency == nil || *o.MaxConcurrency != 54.02 || o.CUDAGraphEstimateApplied == nil || !*o.CUDAGraphEstimateApplied {
		t.Errorf("concurrency %v, estimate applied %v", o.MaxConcurrency, o.CUDAGraphEstimateApplied)
	}
}

func TestBootV0Wording(t *testing.T) {
	var log bytes.Buffer
	v0 := func(c *Config) {
		c.Boot.V0 = true
		c.Compat = DefaultCompat(c.Model)
		c.Compat.VLLMVersion = "0.8.5"
	}
	_, se := bootRun(t, bootCfg(&log, v0))
	if se == nil || se.Failure != BootKVTooSmall {
		t.Fatalf("failure %+v", se)
	}
	// V0 never subtracted a graph estimate: 0.5 GiB more KV than V1
	wantLines(t, log.String(),
		"INFO 09-10 12:00:00 [worker.py:267] Memory profiling takes 1.50 seconds\nINFO 09-10 12:00:00 [worker.py:267] the current vLLM instance can use total_gpu_memory (24.00GiB) x gpu_memory_utilization (0.90) = 21.60GiB",
		"the rest of the memory reserved for KV Cache is 4.86GiB.",
		"[executor_base.py:111] # cuda blocks: 2488, # CPU blocks: 2048",
		"ERROR 09-10 12:00:00 [engine.py:448] The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV cache (39808).",
		`vllm/worker/worker.py", line 545, in raise_if_cache_size_invalid`,
		"\nProcess SpawnProcess-1:\n",
		"RuntimeError: Engine process failed to start. See stack trace for the root cause.")
	if strings.Contains(log.String(), "(APIServer") || strings.Contains(log.String(), "EngineCore") {
		t.Error("V0 log carries V1 process prefixes")
	}
	sl, err := memory.ParseVLLMLog(strings.NewReader(log.String()), memory.VLLMLogOptions{})
	if err != nil || len(sl.Observations) != 1 || *sl.Observations[0].NumGPUBlocks != 2488 {
		t.Fatalf("V0 log parse: %v %+v", err, sl)
	}

	log.Reset()
	if _, se := bootRun(t, bootCfg(&log, func(c *Config) { v0(c); c.MaxModelLen = 8192 })); se != nil {
		t.Fatal(se)
	}
	wantLines(t, log.String(), "Maximum concurrency for 8192 tokens per request: 4.86x", "Graph capturing finished in 6 secs, took 0.50 GiB")
}

func TestBootDeterministic(t *testing.T) {
	// port 0 picks a free port, which the log names
	port := regexp.MustCompile(`'port': [0-9]+|http://127\.0\.0\.1:[0-9]+`)
	for _, mod := range []func(*Config){nil, func(c *Config) { c.MaxModelLen = 8192 }, func(c *Config) { c.Boot.WeightsBytes = gibOf(40) }} {
		var a, b bytes.Buffer
		for _, buf := range []*bytes.Buffer{&a, &b} {
			bootRun(t, bootCfg(buf, mod))
		}
		x, y := port.ReplaceAllString(a.String(), "PORT"), port.ReplaceAllString(b.String(), "PORT")
		if x != y || a.Len() == 0 || !strings.Contains(x, "PORT") {
			t.Fatalf("two identical boots logged differently:\n%s\n---\n%s", a.String(), b.String())
		}
	}
}

func TestBootConfigErrors(t *testing.T) {
	cases := []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.KVCapacityTokens = 1000 }, "drop --kv-capacity-tokens"},
		{func(c *Config) { c.FailStartup = "cuda-oom" }, "drop --fail-startup"},
		{func(c *Config) { c.Boot.GPUMemoryUtilization = 1.5 }, "--gpu-memory-utilization"},
		{func(c *Config) { c.Boot.ComputeCapability = "sm90" }, "--compute-capability"},
		{func(c *Config) { c.Boot.DType = "fp8" }, "--dtype"},
		{func(c *Config) { c.Boot.Quantization = "awq" }, "--quantization"},
		{func(c *Config) { c.Boot.V0 = true }, "V0 engine was removed"},
	}
	for _, tc := range cases {
		var log bytes.Buffer
		_, err := Start(bootCfg(&log, tc.mod))
		var se *StartupError
		if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want a config error naming %s", err, tc.want)
		}
	}
}
