package diagnose

import (
	"fmt"
	"math"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
)

// gibRounding is half the resolution of a GiB figure vLLM prints with two
// decimals: a logged 12.35 GiB is anything in [12.345, 12.355) GiB. Rules
// take the pessimistic edge, so a computed value holds for every value the
// log could have rounded.
const gibRounding = int64(1<<30) / 200

// ruleCtx is what one rule computes from: the facts, the resolved base
// plan, hardware and engine facts, and the calculator when available.
type ruleCtx struct {
	f    Facts
	in   Input
	rem  *Remedy
	base plan.Plan
	hw   memory.HardwareSpec // TotalMemoryBytes 0 when unknown
	cc   *ComputeCapability
	ef   memory.EngineFacts
	// efAssumed: the engine's version has no pinned facts (or is not
	// logged) and narwhal's default version's facts stand in.
	efAssumed bool
	calc      *calculator
	out       []Correction
}

func newRuleCtx(d Diagnosis, in Input, rem *Remedy) *ruleCtx {
	c := &ruleCtx{f: d.Facts, in: in, rem: rem}
	c.base = basePlan(d.Facts, in.Plan, rem)
	rem.Base = c.base
	c.resolveHardware()
	c.resolveEngine()
	if in.Model != nil {
		c.calc = newCalculator(*in.Model, c.hw, c.ef, c.base)
	}
	return c
}

// basePlan is the operator's plan with the fields it leaves unset filled
// from the log's typed facts (what the engine ran). A fact that differs
// from a value the operator set is noted; the operator's value stands.
func basePlan(f Facts, op *plan.Plan, rem *Remedy) plan.Plan {
	var p plan.Plan
	if op != nil {
		p = op.Clone()
	}
	fillInt := func(name string, dst *int64, v *int64, limit int64) {
		switch {
		case v == nil || *v <= 0 || *v > limit:
		case *dst == 0:
			*dst = *v
		case *dst != *v:
			rem.Notes = append(rem.Notes, fmt.Sprintf("the plan's %s is %d but the log's engine ran with %d; the plan's value is used", name, *dst, *v))
		}
	}
	fillInt("max_model_len", &p.MaxModelLen, f.MaxModelLen, plan.MaxModelLenLimit)
	tp, pp, port := int64(p.TensorParallelSize), int64(p.PipelineParallelSize), int64(p.Port)
	fillInt("tensor_parallel_size", &tp, f.TensorParallelSize, plan.MaxParallel)
	fillInt("pipeline_parallel_size", &pp, f.PipelineParallelSize, plan.MaxParallel)
	fillInt("port", &port, f.Port, plan.MaxPort)
	p.TensorParallelSize, p.PipelineParallelSize, p.Port = int(tp), int(pp), int(port)
	if u := f.GPUMemoryUtilization; u != nil && *u > 0 && *u <= 1 {
		switch {
		case p.GPUMemoryUtilization == 0:
			p.GPUMemoryUtilization = *u
		case math.Abs(p.GPUMemoryUtilization-*u) > 1e-6:
			rem.Notes = append(rem.Notes, fmt.Sprintf("the plan's gpu_memory_utilization is %s but the log's engine ran with %s; the plan's value is used", fmtRatio(p.GPUMemoryUtilization), fmtRatio(*u)))
		}
	}
	if f.DType != nil && p.DType == plan.DTypeUnset {
		p.DType = planDType(*f.DType)
	}
	if f.Quantization != nil && p.Quantization == plan.QuantUnset {
		p.Quantization = planQuant(*f.Quantization)
	}
	return p
}

// planDType maps the log's closed dtype onto the plan's enum by a switch:
// the log's spelling never crosses over.
func planDType(d DType) plan.DType {
	switch d {
	case DTypeFloat16:
		return plan.DTypeHalf
	case DTypeBFloat16:
		return plan.DTypeBFloat16
	case DTypeFloat32:
		return plan.DTypeFloat32
	}
	return plan.DTypeUnset
}

// planQuant maps the log's quantization method onto the plan's enum; a
// method the plan does not model stays unset.
func planQuant(q QuantMethod) plan.Quantization {
	switch q {
	case "awq":
		return plan.QuantAWQ
	case "awq_marlin":
		return plan.QuantAWQMarlin
	case "gptq":
		return plan.QuantGPTQ
	case "gptq_marlin":
		return plan.QuantGPTQMarlin
	case "fp8":
		return plan.QuantFP8
	case "bitsandbytes":
		return plan.QuantBitsAndBytes
	case "compressed-tensors":
		return plan.QuantCompressedTensors
	case "marlin":
		return plan.QuantMarlin
	}
	return plan.QuantUnset
}

// resolveHardware takes the operator's GPU, else the calculator input's,
// else the log's GPU key; the log's total capacity replaces a nominal
// table figure (it is what CUDA reported).
func (c *ruleCtx) resolveHardware() {
	switch {
	case c.in.GPU != nil:
		c.hw = *c.in.GPU
	case c.in.Model != nil && c.in.Model.Hardware.TotalMemoryBytes > 0:
		c.hw = c.in.Model.Hardware
	case c.f.GPU != nil:
		if g, err := c.f.GPU.GPU(); err == nil {
			c.hw = memory.HardwareFor(g, 0)
		}
	}
	if t := c.f.TotalMemoryBytes; t != nil && *t > 0 && (c.hw.TotalMemoryBytes == 0 || c.hw.MemoryBasis == memory.BasisNominal) {
		c.hw.TotalMemoryBytes, c.hw.MemoryBasis = *t, memory.BasisVLLMLog
	}
	if cc := c.f.ComputeCapability; cc != nil && cc.Valid() {
		v := *cc
		c.cc = &v
	} else if v, ok := parseCC(c.hw.ComputeCapability); ok {
		c.cc = &v
	}
}

// resolveEngine loads the pinned facts of the engine version: the
// calculator input's, else the log's version, else narwhal's default
// (noted, since its defaults then stand in for the engine's).
func (c *ruleCtx) resolveEngine() {
	if c.in.Model != nil && c.in.Model.Facts.Version != "" {
		c.ef = c.in.Model.Facts
		return
	}
	if v := c.f.EngineVersion; v != nil {
		if ef, _, err := memory.LoadFacts(fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)); err == nil {
			c.ef = ef
			if n := ef.FallbackNote(); n != "" {
				c.note(n)
			}
			return
		}
		c.note(fmt.Sprintf("no pinned engine facts for vLLM %d.%d; the defaults of vLLM %s are assumed", v.Major, v.Minor, memory.DefaultVLLMVersion))
	} else {
		c.note(fmt.Sprintf("the log does not state the vLLM version; the defaults of vLLM %s are assumed", memory.DefaultVLLMVersion))
	}
	c.ef, _, _ = memory.LoadFacts(memory.DefaultVLLMVersion)
	c.efAssumed = true
}

// engineName names the engine the facts stand for: the log's version, or
// the pinned facts' version range.
func (c *ruleCtx) engineName() string {
	if v := c.f.EngineVersion; v != nil && !c.efAssumed {
		return "vLLM " + v.String()
	}
	return fmt.Sprintf("vLLM %s–%s", c.ef.MinVersion, c.ef.MaxVersion)
}

func (c *ruleCtx) note(s string) { c.rem.Notes = append(c.rem.Notes, s) }

func (c *ruleCtx) need(k NeedKind, what, why string) {
	c.rem.Needs = append(c.rem.Needs, Need{Kind: k, What: what, Why: why})
}

func (c *ruleCtx) action(k ActionKind, text string) {
	c.rem.Actions = append(c.rem.Actions, Action{Kind: k, Text: text})
}

// utilization is the gpu_memory_utilization the log's engine ran with —
// logged, else the plan's, else the version's default — the anchor of
// every correction computed from the log's memory figures.
func (c *ruleCtx) utilization() (float64, string) {
	if u := c.f.GPUMemoryUtilization; u != nil && *u > 0 && *u <= 1 {
		return *u, "the logged"
	}
	if u := c.base.GPUMemoryUtilization; u > 0 {
		return u, "the plan's"
	}
	return c.ef.Defaults.GPUMemoryUtilization, c.engineName() + "'s default"
}

// blockSize is the KV block size: the calculator's resolved one, else the
// version's default.
func (c *ruleCtx) blockSize() int64 {
	if c.calc != nil && c.calc.base.BlockSize > 0 {
		return c.calc.base.BlockSize
	}
	return max(1, c.ef.Defaults.BlockSize)
}

// propose records a correction of the base plan. A plan equal to the base
// proposes nothing.
func (c *ruleCtx) propose(p plan.Plan, basis []string, trade []TradeOff, unchecked []Need, artifact bool) {
	changes := plan.Diff(c.base, p)
	if len(changes) == 0 && !artifact {
		return
	}
	if err := p.Validate(); err != nil {
		c.note("a computed correction was dropped: " + err.Error())
		return
	}
	v, risks := c.violations(p, artifact)
	if trade == nil {
		trade = []TradeOff{}
	}
	if unchecked == nil {
		unchecked = []Need{}
	}
	c.out = append(c.out, Correction{Plan: p, Changes: changes, Basis: basis, TradeOffs: trade, Violations: v, Risks: risks,
		Unchecked: unchecked, RequiresArtifact: artifact})
}

func (c *ruleCtx) finish() { c.rem.Corrections = rank(c.out) }

// ceilRatio rounds a utilization up to the hundredth vLLM users write.
func ceilRatio(x float64) float64 { return math.Ceil(x*100-1e-9) / 100 }

// floorRatio rounds down to the hundredth.
func floorRatio(x float64) float64 { return math.Floor(x*100+1e-9) / 100 }

func fmtRatio(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// floorTo rounds n down to a multiple of m.
func floorTo(n, m int64) int64 {
	if m <= 1 {
		return n
	}
	return n / m * m
}
