package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// bootFlags describe the simulated hardware and model of a computed
// vLLM start-up (simengine.Boot). --gpu or --gpu-memory-gib turns it on;
// the other flags then set what vLLM would be launched with.
type bootFlags struct {
	gpu, cc, dtype, quant, era, startupLog            string
	gpuGiB, weightsGiB, util, graphGiB, actGiB, ntGiB float64
	kvBPT                                             int64
	heads, tp                                         int
	eager                                             bool
}

// bootHardwareFlags need the device's memory to mean anything.
var bootHardwareFlags = []string{"compute-capability", "model-weights-gib", "kv-bytes-per-token", "gpu-memory-utilization",
	"enforce-eager", "cudagraph-memory-gib", "activation-memory-gib", "non-torch-memory-gib", "dtype", "quantization", "num-attention-heads",
	"tensor-parallel-size", "log-era"}

func (f *bootFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.gpu, "gpu", "", "simulate vLLM's start-up on this GPU from the built-in table (memory, compute capability, device name)")
	fs.Float64Var(&f.gpuGiB, "gpu-memory-gib", 0, "simulate the start-up on a device with this much memory (GiB; overrides --gpu's)")
	fs.StringVar(&f.cc, "compute-capability", "", "the simulated device's compute capability, e.g. 7.5 (default --gpu's, else 9.0)")
	fs.Float64Var(&f.weightsGiB, "model-weights-gib", 14.99, "the whole model's weights in GiB (sharded over --tensor-parallel-size)")
	fs.Int64Var(&f.kvBPT, "kv-bytes-per-token", 0, "the whole model's KV bytes per token, all layers (default from the identity: 131072)")
	fs.Float64Var(&f.util, "gpu-memory-utilization", 0.9, "vLLM's --gpu-memory-utilization for the simulated start-up")
	fs.BoolVar(&f.eager, "enforce-eager", false, "vLLM's --enforce-eager: no CUDA graphs, no graph memory")
	fs.Float64Var(&f.graphGiB, "cudagraph-memory-gib", 0.5, "CUDA graph memory per rank when not eager (GiB)")
	fs.Float64Var(&f.actGiB, "activation-memory-gib", 1.25, "torch peak memory increase while vLLM profiles (GiB per rank)")
	fs.Float64Var(&f.ntGiB, "non-torch-memory-gib", 0.5, "non-torch memory: CUDA context, NCCL (GiB per rank)")
	fs.StringVar(&f.dtype, "dtype", "auto", "vLLM's --dtype: auto (the model's bfloat16), bfloat16, float16, half, float32")
	fs.StringVar(&f.quant, "quantization", "", "vLLM's --quantization: fp8 (online FP8 of the 16-bit checkpoint, about half the weights; needs compute capability 7.5)")
	fs.IntVar(&f.heads, "num-attention-heads", 32, "the model's attention heads (tensor parallelism must divide them)")
	fs.IntVar(&f.tp, "tensor-parallel-size", 1, "vLLM's --tensor-parallel-size")
	fs.StringVar(&f.era, "log-era", "v1", "startup-log wording: v1, or v0 (the V0 engine; needs --vllm-version below 0.11)")
	fs.StringVar(&f.startupLog, "startup-log", "", "write the vLLM startup log to this file (default stderr)")
}

// boot turns the flags into a simengine.Boot; a zero Boot (no --gpu, no
// --gpu-memory-gib) keeps the legacy start-up.
func (f *bootFlags) boot(fs *pflag.FlagSet) (simengine.Boot, error) {
	if f.gpu == "" && !fs.Changed("gpu-memory-gib") {
		for _, n := range bootHardwareFlags {
			if fs.Changed(n) {
				return simengine.Boot{}, fmt.Errorf("--%s needs --gpu or --gpu-memory-gib: the simulated start-up needs the device's memory", n)
			}
		}
		return simengine.Boot{}, nil
	}
	var b simengine.Boot
	if f.gpu != "" {
		g, err := memory.LookupGPU(f.gpu)
		if err != nil {
			return b, err
		}
		b.GPUName, b.GPUTotalBytes, b.ComputeCapability = g.DeviceName, g.TotalMemoryBytes, g.ComputeCapability
	}
	if fs.Changed("gpu-memory-gib") {
		if f.gpuGiB <= 0 {
			return b, fmt.Errorf("--gpu-memory-gib must be > 0, got %v", f.gpuGiB)
		}
		b.GPUTotalBytes = gibToBytes(f.gpuGiB)
	}
	if f.cc != "" {
		b.ComputeCapability = f.cc
	}
	if f.weightsGiB <= 0 || f.graphGiB <= 0 || f.actGiB <= 0 || f.ntGiB <= 0 || f.heads <= 0 || f.tp <= 0 || f.kvBPT < 0 {
		return b, errors.New("--model-weights-gib, the *-memory-gib flags, --num-attention-heads and --tensor-parallel-size must be > 0, --kv-bytes-per-token ≥ 0 (0: the identity's)")
	}
	switch f.era {
	case "v1":
	case "v0":
		b.V0 = true
	default:
		return b, fmt.Errorf("--log-era %q: use v1 or v0", f.era)
	}
	b.WeightsBytes, b.KVBytesPerToken, b.GPUMemoryUtilization, b.EnforceEager = gibToBytes(f.weightsGiB), f.kvBPT, f.util, f.eager
	b.CUDAGraphBytes, b.ActivationBytes, b.NonTorchBytes = gibToBytes(f.graphGiB), gibToBytes(f.actGiB), gibToBytes(f.ntGiB)
	b.DType, b.Quantization, b.NumAttentionHeads, b.TensorParallelSize = f.dtype, f.quant, f.heads, f.tp
	return b, b.Validate()
}

func gibToBytes(g float64) int64 { return int64(g * (1 << 30)) }

// logWriter opens --startup-log (the caller closes it), or stderr.
func (f *bootFlags) logWriter() (io.Writer, func(), error) {
	if f.startupLog == "" {
		return os.Stderr, func() {}, nil
	}
	w, err := os.Create(f.startupLog)
	if err != nil {
		return nil, nil, fmt.Errorf("--startup-log: %w", err)
	}
	return w, func() { _ = w.Close() }, nil
}
