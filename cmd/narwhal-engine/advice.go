package main

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/launch"
	"github.com/narwhal-go/narwhal/internal/planner"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// adviceFlags ask the memory calculator for each engine's
// --max-model-len and --gpu-memory-utilization.
type adviceFlags struct {
	modelDir    string
	maxModelLen int64
	utilization float64
	gpuGiB      float64
	dp          int  // vLLM --data-parallel-size
	ep          bool // vLLM --enable-expert-parallel
}

// checkLayout refuses a layout the fleet's engines cannot hold: a DP size
// below 1, the layout flags without --model-dir, or TP × DP GPUs beyond
// hardware.accelerators_per_engine.
func checkLayout(cfg *fleet.Config, f adviceFlags) error {
	if f.dp < 1 {
		return cli.Usage("--dp must be ≥ 1, got %d", f.dp)
	}
	if f.modelDir == "" && (f.dp > 1 || f.ep) {
		return cli.Usage("--dp and --enable-expert-parallel size engines with the memory calculator: add --model-dir")
	}
	h := cfg.Hardware
	if h == nil || h.AcceleratorsPerEngine < 1 {
		return nil
	}
	if need := max(1, h.TensorParallel) * f.dp; need > h.AcceleratorsPerEngine {
		return cli.Invalid(fmt.Errorf("hardware.accelerators_per_engine %d: tensor_parallel %d × --dp %d needs %d; raise it or lower --dp",
			h.AcceleratorsPerEngine, max(1, h.TensorParallel), f.dp, need))
	}
	return nil
}

// memoryAdvice plans the fleet's model on the fleet's hardware
// (hardware.accelerator, hardware.tensor_parallel, the contract's vLLM
// version) and returns what every engine's command should carry. A model
// that does not fit, or a prediction that is unknown, is refused: a plan
// must not start engines the calculator says will fail.
func memoryAdvice(cfg *fleet.Config, f adviceFlags) (*launch.MemoryAdvice, string, error) {
	if err := checkLayout(cfg, f); err != nil {
		return nil, "", err
	}
	if f.modelDir == "" {
		return nil, "", nil
	}
	if cfg.Hardware == nil || cfg.Hardware.Accelerator == "" {
		return nil, "", cli.Invalid(fmt.Errorf("--model-dir needs the fleet's hardware.accelerator (the GPU the engines run on) to plan memory"))
	}
	req := planner.Request{ModelDir: f.modelDir, GPU: cfg.Hardware.Accelerator, GPUMemoryGiB: f.gpuGiB,
		Launch: memory.LaunchConfig{TP: cfg.Hardware.TensorParallel, DP: f.dp, EnableExpertParallel: f.ep,
			MaxModelLen: f.maxModelLen, GPUMemoryUtilization: f.utilization}}
	if k := cfg.EngineContract; k != nil && k.VLLMVersion != "" {
		req.VLLMVersion = k.VLLMVersion
	}
	if k := cfg.EngineContract; k != nil && k.KVCacheDtype != "" {
		req.Launch.KVCacheDType = k.KVCacheDtype
	}
	res, err := planner.Plan(req, ports.SystemClock())
	if err != nil {
		if planner.IsInputError(err) {
			return nil, "", cli.Invalid(err)
		}
		return nil, "", cli.Failed(err)
	}
	p := res.Prediction
	switch {
	case p.Status != memory.PredictionKnown:
		return nil, "", cli.Failed(fmt.Errorf("memory plan for %s on %s is unknown (%v); plan without --model-dir and size the engines by hand",
			f.modelDir, cfg.Hardware.Accelerator, p.UnknownReasons))
	case !p.Fits:
		return nil, "", cli.Failed(fmt.Errorf("%s does not fit on %s at tensor_parallel %d: short by %d MiB per GPU; raise hardware.tensor_parallel, lower --max-model-len, or use a larger GPU",
			f.modelDir, cfg.Hardware.Accelerator, max(1, cfg.Hardware.TensorParallel), -p.MarginBytes>>20))
	}
	length := p.Launch.MaxModelLen
	if f.maxModelLen == 0 {
		length = p.MaxFeasibleModelLen
	}
	note := fmt.Sprintf("memory advice (narwhal plan, %s): --max-model-len %d --gpu-memory-utilization %g; %d KV tokens per engine, margin %d MiB per GPU",
		p.Status, length, p.Launch.GPUMemoryUtilization, p.KVCapacityTokens, p.MarginBytes>>20)
	adv := &launch.MemoryAdvice{MaxModelLen: length, GPUMemoryUtilization: p.Launch.GPUMemoryUtilization, DataParallel: f.dp, ExpertParallel: f.ep}
	return adv, note, nil
}
