// Package planner is what `narwhal plan` does between its flags and its
// output: read an artifact's headers and config, observe its identity and
// lineage, detect its quantization, predict its memory on a GPU under a
// vLLM version, fingerprint the planned execution, and turn the result
// into an evidence record whose tier comes from the store.
//
// It wires the deterministic packages (artifact types, quant, memory,
// execfp, evidence) to the file readers; time reaches it only through the
// clock it is given, so the same inputs give a byte-identical record.
package planner

import (
	"errors"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
	"github.com/narwhal-go/narwhal/internal/evidence/execfp"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/quant"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// Request is one plan: a model directory on a GPU under a launch.
type Request struct {
	ModelDir string
	// GPU names a card in the built-in table; GPUMemoryGiB, when set,
	// gives the memory of a card the table lacks (or overrides it).
	GPU          string
	GPUMemoryGiB float64
	Launch       memory.LaunchConfig
	VLLMVersion  string
	// HashAll hashes every file for the artifact identity (slow: reads
	// the weights). Off, weight digests come from sidecar sources only.
	HashAll bool
	// MarginBytes is the stated margin the plan must keep; 0 takes the
	// prediction's uncertainty band (upper − central estimate).
	MarginBytes int64
}

// DefaultVLLMVersion is the engine version a plan assumes when none is
// given (the calculator's).
const DefaultVLLMVersion = memory.DefaultVLLMVersion

// InputError is a plan that cannot be made from what was given: a missing
// or malformed file, an unknown GPU, an unsupported version, a topology
// the model cannot take. The CLI exits 2 for it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// IsInputError reports whether err is bad input.
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

func bad(format string, a ...any) error { return &InputError{Err: fmt.Errorf(format, a...)} }

// Result is everything a plan found, before it is stored.
type Result struct {
	Prediction   memory.Prediction
	Quantization quant.QuantizationSpec
	QuantVerdict quant.Verdict
	Local        artifact.LocalObservation
	Lineage      artifact.LineageFingerprint
	Execution    execfp.Input
	ExecutionFP  string
	GPU          memory.HardwareSpec
	FactsVersion string
	StatedMargin int64
	Warnings     []string
}

// Plan makes the prediction for req.
func Plan(req Request, clock ports.Clock) (Result, error) {
	in, res, err := inputs(req, clock)
	if err != nil {
		return Result{}, err
	}
	p, err := memory.Plan(in)
	if err != nil {
		return Result{}, &InputError{Err: fmt.Errorf("%s: %w", req.ModelDir, err)}
	}
	res.Prediction = p
	res.StatedMargin = req.MarginBytes
	if res.StatedMargin <= 0 {
		res.StatedMargin = bandWidth(p)
	}
	res.Execution, res.ExecutionFP, err = execution(res, p)
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// CalculatorInput reads the model directory, GPU and engine facts of req
// into the memory calculator's input, as Plan does, without predicting:
// narwhal diagnose runs the calculator on variants of a broken plan.
func CalculatorInput(req Request, clock ports.Clock) (memory.PlanInput, error) {
	in, _, err := inputs(req, clock)
	return in, err
}

// inputs reads what the calculator needs and what the record names.
func inputs(req Request, clock ports.Clock) (memory.PlanInput, Result, error) {
	var res Result
	if req.ModelDir == "" {
		return memory.PlanInput{}, res, bad("--model-dir is required: the directory holding config.json and the *.safetensors files")
	}
	h, err := artifact.ReadHeaders(req.ModelDir)
	if err != nil {
		return memory.PlanInput{}, res, &InputError{Err: err}
	}
	cfg, err := artifact.ReadConfig(req.ModelDir)
	switch {
	case err != nil:
		return memory.PlanInput{}, res, &InputError{Err: err}
	case cfg == nil:
		return memory.PlanInput{}, res, bad("%s: no config.json; the plan needs the model's architecture facts", req.ModelDir)
	}
	res.Warnings = append(res.Warnings, h.Warnings...)
	if res.Quantization, res.QuantVerdict, err = detectQuant(req.ModelDir, cfg, h); err != nil {
		return memory.PlanInput{}, res, err
	}
	if res.Local, res.Lineage, err = identify(req, h, cfg, clock); err != nil {
		return memory.PlanInput{}, res, err
	}
	hw, err := hardware(req)
	if err != nil {
		return memory.PlanInput{}, res, err
	}
	res.GPU = hw
	version := req.VLLMVersion
	if version == "" {
		version = DefaultVLLMVersion
	}
	facts, _, err := memory.LoadFacts(version)
	if err != nil {
		return memory.PlanInput{}, res, &InputError{Err: err}
	}
	res.FactsVersion = version
	cal, err := memory.SeedCalibration()
	if err != nil {
		return memory.PlanInput{}, res, fmt.Errorf("seed calibration set: %w", err)
	}
	in := memory.PlanInput{Headers: h, Config: cfg, Hardware: hw, Facts: facts, Launch: req.Launch, Calibration: cal}
	if res.QuantVerdict.Support == quant.Supported {
		q := res.Quantization
		in.Quant = &q // its kernel workspaces (Marlin repack) are memory too
	}
	return in, res, nil
}

func detectQuant(dir string, cfg []byte, h artifact.Headers) (quant.QuantizationSpec, quant.Verdict, error) {
	qc, found, err := artifact.ReadQuantConfig(dir, cfg)
	if err != nil {
		return quant.QuantizationSpec{}, quant.Verdict{}, &InputError{Err: err}
	}
	var c *quant.Config
	if found {
		cc, err := quant.ConfigFrom(qc)
		if err != nil {
			return quant.QuantizationSpec{}, quant.Verdict{}, &InputError{Err: fmt.Errorf("%s: %w", dir, err)}
		}
		c = &cc
	}
	spec, v := quant.Detect(c, h, quant.Methods())
	return spec, v, nil
}

func identify(req Request, h artifact.Headers, cfg []byte, clock ports.Clock) (artifact.LocalObservation, artifact.LineageFingerprint, error) {
	mode := artifact.HashSmall
	if req.HashAll {
		mode = artifact.HashAll
	}
	obs, err := artifact.ObserveLocal(req.ModelDir, mode, clock)
	if err != nil {
		return obs, artifact.LineageFingerprint{}, &InputError{Err: err}
	}
	rev := ""
	if obs.Observation != nil {
		rev = obs.Observation.ResolvedRevision
	}
	lin, err := artifact.Lineage(h, cfg, obs.Files, rev)
	if err != nil {
		return obs, lin, &InputError{Err: fmt.Errorf("%s: lineage: %w", req.ModelDir, err)}
	}
	return obs, lin, nil
}

// hardware resolves the GPU: the table's card, or --gpu-memory-gib for
// one it lacks (then the capability is unknown, never guessed).
func hardware(req Request) (memory.HardwareSpec, error) {
	if req.GPU == "" && req.GPUMemoryGiB == 0 {
		return memory.HardwareSpec{}, bad("--gpu is required (a card name such as h100-sxm), or --gpu-memory-gib for a card the table lacks")
	}
	hw, err := memory.ResolveHardware(req.GPU, req.GPUMemoryGiB, max(1, req.Launch.TP)*max(1, req.Launch.PP)*max(1, req.Launch.DP))
	if err != nil {
		return memory.HardwareSpec{}, &InputError{Err: err}
	}
	return hw, nil
}

// bandWidth is how far the prediction's memory estimate may be off
// upward: the sum of the predicted components' upper − central figures.
func bandWidth(p memory.Prediction) int64 {
	var w int64
	for _, c := range []memory.Component{p.ActivationPeak, p.NonTorch, p.CUDAGraphEstimate} {
		if c.Known() {
			w += c.Upper - c.Bytes
		}
	}
	return w
}
